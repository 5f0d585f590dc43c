//! The subset of a Spin manifest (spin.toml, manifest version 2) that `serve` honours:
//! `[variables]`, and for one `[component.NAME]`: `source`, `allowed_outbound_hosts`,
//! `key_value_stores` and `[component.NAME.variables]`. Everything else (triggers, build, …) is
//! ignored: the host serves one component on every route.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::variables::{ComponentVariables, expand_template, validate_name};

/// A parsed manifest.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// Directory of the manifest file (relative `source` paths are resolved against it).
    pub dir: PathBuf,
    /// `[variables]`: application variables.
    pub variables: BTreeMap<String, AppVariable>,
    /// `[component.NAME]` tables.
    pub components: BTreeMap<String, ManifestComponent>,
}

/// One `[variables]` entry. (`default` is not secret by Spin's rules, but it is not printed
/// either: `Debug` shows whether there is one.)
#[derive(Clone, Default, Deserialize)]
pub struct AppVariable {
    /// Value used when no provider (flag, environment) has one.
    #[serde(default)]
    pub default: Option<String>,
    /// Startup fails if no provider has a value.
    #[serde(default)]
    pub required: bool,
    /// Marked secret in the manifest (this host never prints any value anyway).
    #[serde(default)]
    pub secret: bool,
}

impl std::fmt::Debug for AppVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppVariable")
            .field("has_default", &self.default.is_some())
            .field("required", &self.required)
            .field("secret", &self.secret)
            .finish()
    }
}

/// One `[component.NAME]` table (the fields `serve` uses). `Debug` shows variable names only.
#[derive(Clone, Default, Deserialize)]
pub struct ManifestComponent {
    /// `source`, when it is a local path (relative to the manifest).
    #[serde(default)]
    pub source: Option<toml::Value>,
    /// `allowed_outbound_hosts`, possibly with `{{ var }}` templates.
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<String>,
    /// `key_value_stores` labels the component may open.
    #[serde(default)]
    pub key_value_stores: Vec<String>,
    /// `[component.NAME.variables]`: component variable → template over application variables.
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
}

impl std::fmt::Debug for ManifestComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManifestComponent")
            .field("source", &self.source)
            .field("allowed_outbound_hosts", &self.allowed_outbound_hosts)
            .field("key_value_stores", &self.key_value_stores)
            .field("variables", &self.variables.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Deserialize)]
struct RawManifest {
    spin_manifest_version: toml::Value,
    #[serde(default)]
    variables: BTreeMap<String, AppVariable>,
    #[serde(default)]
    component: BTreeMap<String, ManifestComponent>,
}

impl Manifest {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> anyhow::Result<Manifest> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading the manifest {}", path.display()))?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Manifest::parse(&text, dir).with_context(|| format!("parsing the manifest {}", path.display()))
    }

    /// Parses manifest text; `dir` is where relative paths start.
    pub fn parse(text: &str, dir: PathBuf) -> anyhow::Result<Manifest> {
        let raw: RawManifest = toml::from_str(text)?;
        match raw.spin_manifest_version {
            toml::Value::Integer(2) => {}
            toml::Value::String(ref s) if s == "2" => {}
            _ => bail!("only spin_manifest_version = 2 is supported"),
        }
        for name in raw.variables.keys() {
            validate_name(name).map_err(|why| anyhow::anyhow!("[variables]: {why}"))?;
        }
        for (id, component) in &raw.component {
            for name in component.variables.keys() {
                validate_name(name).map_err(|why| anyhow::anyhow!("[component.{id}.variables]: {why}"))?;
            }
        }
        Ok(Manifest { dir, variables: raw.variables, components: raw.component })
    }

    /// The component called `name`, or the only component when `name` is `None`.
    pub fn component(&self, name: Option<&str>) -> anyhow::Result<(&str, &ManifestComponent)> {
        match name {
            Some(name) => self
                .components
                .get_key_value(name)
                .map(|(k, v)| (k.as_str(), v))
                .with_context(|| format!("the manifest has no [component.{name}]")),
            None => {
                let mut all = self.components.iter();
                match (all.next(), all.next()) {
                    (Some((k, v)), None) => Ok((k.as_str(), v)),
                    (None, _) => bail!("the manifest has no components"),
                    _ => bail!(
                        "the manifest has several components ({}); choose one with --component-name",
                        self.components.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                }
            }
        }
    }

    /// The value of every application variable: the provider's (`provided`, flags over
    /// environment) or else the default. A required variable without a value is an error; names in
    /// `provided` that the manifest does not declare are ignored (with a warning naming them).
    pub fn application_values(&self, provided: &BTreeMap<String, String>) -> anyhow::Result<BTreeMap<String, String>> {
        for name in provided.keys() {
            if !self.variables.contains_key(name) {
                eprintln!("serve: variable {name:?} is not declared in the manifest's [variables]; ignored");
            }
        }
        let mut out = BTreeMap::new();
        for (name, decl) in &self.variables {
            match provided.get(name).or(decl.default.as_ref()) {
                Some(value) => {
                    out.insert(name.clone(), value.clone());
                }
                None if decl.required => bail!(
                    "required variable {name:?} has no value: set SPIN_VARIABLE_{} or pass --variable {name}=…",
                    name.to_ascii_uppercase()
                ),
                None => {}
            }
        }
        Ok(out)
    }
}

/// What one component gets from a manifest once its templates are resolved.
#[derive(Debug)]
pub struct ResolvedComponent {
    /// The component's id in the manifest.
    pub id: String,
    /// Its `source` as a path, resolved against the manifest directory (`None` if it has none or
    /// it is not a plain path).
    pub source: Option<PathBuf>,
    /// `[component.NAME.variables]`, expanded.
    pub variables: ComponentVariables,
    /// `allowed_outbound_hosts`, expanded.
    pub allowed_outbound_hosts: Vec<String>,
    /// `key_value_stores`.
    pub key_value_stores: Vec<String>,
}

impl Manifest {
    /// Resolves the component's variables and allowed hosts against the application variables
    /// (`provided`: flags over environment; see [`Manifest::application_values`]).
    pub fn resolve(
        &self,
        component: Option<&str>,
        provided: &BTreeMap<String, String>,
    ) -> anyhow::Result<ResolvedComponent> {
        let (id, comp) = self.component(component)?;
        let app = self.application_values(provided)?;
        let lookup = |name: &str| app.get(name).cloned();
        let mut variables = BTreeMap::new();
        for (name, template) in &comp.variables {
            let value =
                expand_template(template, lookup).with_context(|| format!("[component.{id}.variables] {name}"))?;
            variables.insert(name.clone(), value);
        }
        let allowed_outbound_hosts = comp
            .allowed_outbound_hosts
            .iter()
            .map(|t| expand_template(t, lookup).with_context(|| format!("[component.{id}] allowed_outbound_hosts")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let source = match &comp.source {
            Some(toml::Value::String(path)) => Some(self.dir.join(path)),
            _ => None,
        };
        Ok(ResolvedComponent {
            id: id.to_owned(),
            source,
            variables: ComponentVariables::new(variables),
            allowed_outbound_hosts,
            key_value_stores: comp.key_value_stores.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML: &str = r#"
spin_manifest_version = 2
[application]
name = "app"
[variables]
captchaai_key = { required = true, secret = true }
api_base = { default = "https://ocr.captchaai.com" }
unused = { default = "x" }
[[trigger.http]]
route = "/..."
component = "edge"
[component.edge]
source = "target/wasm32-wasip2/release/edge.wasm"
allowed_outbound_hosts = ["{{ api_base }}", "http://127.0.0.1:8099"]
key_value_stores = ["default"]
[component.edge.variables]
key = "{{ captchaai_key }}"
base = "{{api_base}}/"
[component.edge.build]
command = "cargo build"
"#;

    #[test]
    fn resolves_templates_defaults_and_providers() {
        let m = Manifest::parse(TOML, PathBuf::from("/app")).unwrap();
        let provided = BTreeMap::from([("captchaai_key".to_owned(), "k".repeat(32))]);
        let r = m.resolve(None, &provided).unwrap();
        assert_eq!(r.id, "edge");
        assert_eq!(r.source.unwrap(), Path::new("/app/target/wasm32-wasip2/release/edge.wasm"));
        assert_eq!(r.variables.get("key").unwrap(), "k".repeat(32));
        assert_eq!(r.variables.get("base").unwrap(), "https://ocr.captchaai.com/");
        assert!(r.variables.get("api_base").is_err(), "only component variables are visible");
        assert_eq!(r.allowed_outbound_hosts, ["https://ocr.captchaai.com", "http://127.0.0.1:8099"]);
        assert_eq!(r.key_value_stores, ["default"]);

        let provided = BTreeMap::from([
            ("captchaai_key".to_owned(), "x".to_owned()),
            ("api_base".to_owned(), "http://127.0.0.1:1".to_owned()),
        ]);
        let r = m.resolve(Some("edge"), &provided).unwrap();
        assert_eq!(r.allowed_outbound_hosts[0], "http://127.0.0.1:1");
    }

    #[test]
    fn missing_required_variable_is_an_error_without_values() {
        let m = Manifest::parse(TOML, PathBuf::new()).unwrap();
        let err = format!("{:#}", m.resolve(None, &BTreeMap::new()).unwrap_err());
        assert!(err.contains("captchaai_key"), "{err}");
        assert!(m.resolve(Some("nope"), &BTreeMap::new()).is_err());
    }

    #[test]
    fn rejects_other_versions_and_bad_names() {
        assert!(Manifest::parse("spin_manifest_version = 1", PathBuf::new()).is_err());
        assert!(Manifest::parse("spin_manifest_version = 2\n[variables]\nBad = {}", PathBuf::new()).is_err());
        let undeclared = "spin_manifest_version = 2\n[component.c]\nvariables = { a = \"{{ nope }}\" }";
        let m = Manifest::parse(undeclared, PathBuf::new()).unwrap();
        assert!(m.resolve(None, &BTreeMap::new()).is_err());
    }
}
