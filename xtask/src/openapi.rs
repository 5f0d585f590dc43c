//! `cargo xtask openapi`: writes the per-type task schemas derived from the engine's type table
//! (`schema.rs`, over `captchaai_engine::task_types`) into `edge/openapi.json`
//! (`components.schemas`: `Task` and every `Task_<type>`), keeping the rest of the document as
//! it is, key order included.
//!
//! - `cargo xtask openapi --check`: fails if the committed document differs from what would be
//!   written (the unit test below does the same under `cargo test`).
//! - `cargo xtask openapi --validate-tasks`: reads one task JSON per line on stdin and answers
//!   each with one line, `ok` or `refused <field>: <message>`, from the engine's own validation
//!   (`Task::from_json`). The property test (`edge/contract/schema_props.py`) generates
//!   schema-valid tasks and asks this.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::{env, fs};

use anyhow::{Context, Result, bail};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

use crate::schema;

pub fn openapi() -> Result<()> {
    let path = document_path()?;
    let committed = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let generated = render(&committed)?;
    match env::args().nth(2).as_deref() {
        None => {
            if generated == committed {
                println!("{}: up to date", path.display());
            } else {
                fs::write(&path, &generated).with_context(|| format!("writing {}", path.display()))?;
                println!("{}: task schemas written", path.display());
            }
            Ok(())
        }
        Some("--check") if generated == committed => {
            println!("{}: up to date", path.display());
            Ok(())
        }
        Some("--check") => bail!("{} is stale: run `cargo xtask openapi`", path.display()),
        Some("--validate-tasks") => validate_tasks(),
        Some(other) => bail!("unknown option {other}; usage: cargo xtask openapi [--check | --validate-tasks]"),
    }
}

fn document_path() -> Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("workspace root")?;
    Ok(root.join("edge/openapi.json"))
}

/// The document with its task schemas replaced by the generated ones: pretty JSON (2 spaces)
/// with a final newline, every other key where it was.
pub fn render(document: &str) -> Result<String> {
    let mut doc: Ordered = serde_json::from_str(document).context("edge/openapi.json is not JSON")?;
    let schemas = doc
        .get_mut("components")
        .and_then(|c| c.get_mut("schemas"))
        .and_then(Ordered::entries_mut)
        .context("edge/openapi.json has no components.schemas object")?;
    let generated = schema::task_schemas();
    let mut fresh = vec![("Task".to_owned(), Ordered::from(&generated["Task"]))];
    for task_type in captchaai_engine::task_types() {
        let name = schema::component_name(task_type);
        fresh.push((name.clone(), Ordered::from(&generated[&name])));
    }
    let is_task = |name: &str| name == "Task" || name.starts_with("Task_");
    // The generated schemas go where `Task` was (or first).
    let at = schemas.iter().position(|(name, _)| is_task(name)).unwrap_or(0);
    schemas.retain(|(name, _)| !is_task(name));
    let at = at.min(schemas.len());
    schemas.splice(at..at, fresh);
    let mut text = serde_json::to_string_pretty(&doc)?;
    text.push('\n');
    Ok(text)
}

/// One line per task on stdin, one verdict per line on stdout (flushed each time).
fn validate_tasks() -> Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line?;
        match captchaai_engine::Task::from_json(&line) {
            Ok(_) => writeln!(out, "ok")?,
            Err(e) => {
                let field = e.field.clone().unwrap_or_default();
                writeln!(out, "refused {field}: {}", e.message.replace('\n', " "))?
            }
        }
        out.flush()?;
    }
    Ok(())
}

/// JSON that keeps object keys in document order (serde_json's `Value` sorts them here: the
/// workspace does not enable `preserve_order`, which would change the engine's output).
#[derive(Clone, Debug, PartialEq)]
enum Ordered {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Ordered>),
    Object(Vec<(String, Ordered)>),
}

impl Ordered {
    fn get_mut(&mut self, key: &str) -> Option<&mut Ordered> {
        self.entries_mut()?.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn entries_mut(&mut self) -> Option<&mut Vec<(String, Ordered)>> {
        match self {
            Ordered::Object(entries) => Some(entries),
            _ => None,
        }
    }
}

impl From<&Value> for Ordered {
    fn from(value: &Value) -> Ordered {
        match value {
            Value::Null => Ordered::Null,
            Value::Bool(b) => Ordered::Bool(*b),
            Value::Number(n) => Ordered::Number(n.clone()),
            Value::String(s) => Ordered::String(s.clone()),
            Value::Array(items) => Ordered::Array(items.iter().map(Ordered::from).collect()),
            Value::Object(map) => Ordered::Object(map.iter().map(|(k, v)| (k.clone(), Ordered::from(v))).collect()),
        }
    }
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Ordered::Null => serializer.serialize_unit(),
            Ordered::Bool(b) => serializer.serialize_bool(*b),
            Ordered::Number(n) => n.serialize(serializer),
            Ordered::String(s) => serializer.serialize_str(s),
            Ordered::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Ordered::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ordered, D::Error> {
        struct OrderedVisitor;
        impl<'de> Visitor<'de> for OrderedVisitor {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<Ordered, E> {
                Ok(Ordered::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Ordered, E> {
                Ok(Ordered::Bool(b))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Ordered, E> {
                Ok(Ordered::Number(n.into()))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Ordered, E> {
                Ok(Ordered::Number(n.into()))
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Ordered, E> {
                serde_json::Number::from_f64(n).map(Ordered::Number).ok_or_else(|| E::custom("not a finite number"))
            }
            fn visit_str<E>(self, s: &str) -> Result<Ordered, E> {
                Ok(Ordered::String(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<Ordered, E> {
                Ok(Ordered::String(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ordered, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Ordered::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Ordered>()? {
                    entries.push((k, v));
                }
                Ok(Ordered::Object(entries))
            }
        }
        deserializer.deserialize_any(OrderedVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed edge/openapi.json is exactly what `cargo xtask openapi` writes.
    #[test]
    fn committed_openapi_is_generated() {
        let path = document_path().unwrap();
        let committed = fs::read_to_string(&path).unwrap();
        let generated = render(&committed).unwrap();
        assert!(generated == committed, "{} is stale: run `cargo xtask openapi`", path.display());
    }

    /// Rendering keeps everything but the task schemas, key order included, and is stable.
    #[test]
    fn render_replaces_only_task_schemas() {
        let doc = r#"{"b": 1, "components": {"schemas": {"Z": {}, "Task": {"old": true}, "Task_gone": {}, "A": [1.5, null]}}, "a": "x"}"#;
        let text = render(doc).unwrap();
        let again = render(&text).unwrap();
        assert_eq!(text, again);
        let keys: Vec<&str> = text.lines().filter(|l| l.starts_with("  \"")).collect();
        assert_eq!(keys, ["  \"b\": 1,", "  \"components\": {", "  \"a\": \"x\""]);
        let value: Value = serde_json::from_str(&text).unwrap();
        let schemas = value["components"]["schemas"].as_object().unwrap();
        assert!(schemas.get("Task_gone").is_none());
        assert_eq!(schemas["A"], serde_json::json!([1.5, null]));
        assert_eq!(schemas.len(), 2 + 1 + captchaai_engine::task_types().len());
        assert!(text.find("\"Z\"").unwrap() < text.find("\"Task\"").unwrap());
        assert!(text.find("\"Task_bls\"").unwrap() < text.find("\"A\"").unwrap());
    }
}
