//! `cargo xtask python-types`: writes the Python package's task dataclasses
//! (`bindings/python/src/captchaai_engine/tasks.py`) from the engine's read-only type listing
//! (`captchaai_engine::task_types`), the listing `schema.rs` turns into `edge/openapi.json`.
//!
//! - One frozen dataclass per type, named from the type (`recaptcha_v2` -> `RecaptchaV2Task`):
//!   required fields positional in table order, optional ones keyword-only. Each field's
//!   docstring comes from its kind, limits and wire parameter.
//! - Optional fields that many types share with the same definition (`cookies` and `user_agent`;
//!   `proxy` and `proxytype`) are written once, in a private mixin per group of fields that the
//!   same types have; `extra` once, on the `Task` base class (its rules from `ExtraRules`).
//! - Proxies, cookies and images stay out of `repr` (credentials and bulk); `TaskBase.__repr__`
//!   shows the required fields, then the optional ones that are set.
//! - `cargo xtask python-types --check` fails if the committed file differs from what would be
//!   written (the unit test below does the same under `cargo test`).
//!
//! The methods every task has (`to_dict`, `to_json`) and the task helpers live in the
//! hand-written `_task_base.py`, which the generated module imports.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Result;
use captchaai_engine::{AnswerShape, FieldKind, ImageLimits, TaskField, TaskType, task_types};

/// Where the generated module goes, from the workspace root.
const OUTPUT: &str = "bindings/python/src/captchaai_engine/tasks.py";

/// An optional field shared by at least this many types (with one definition) is written once,
/// in a mixin.
const SHARED_BY_AT_LEAST: usize = 3;

/// How words of type names are spelled in class names (others: first letter upper case).
const SPELLING: &[(&str, &str)] = &[("geetest", "GeeTest"), ("captchafox", "CaptchaFox")];

/// Other names of classes, kept for code written against them: `(alias, type name)`.
const ALIASES: &[(&str, &str)] = &[("GeeTestTask", "geetest_v3")];

pub fn python_types() -> Result<()> {
    crate::generated::write_or_check(OUTPUT, &render(), "python-types", "task dataclasses")
}

/// The class name of a type: its words capitalised (see [`SPELLING`]), then `Task`.
pub fn class_name(task_type: TaskType) -> String {
    let mut name: String = task_type.name().split('_').map(word).collect();
    name.push_str("Task");
    name
}

fn word(w: &str) -> String {
    if let Some((_, spelled)) = SPELLING.iter().find(|(from, _)| *from == w) {
        return (*spelled).to_owned();
    }
    let mut chars = w.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

/// A field's definition, for telling shared fields apart: the same name with another parameter
/// or kind is another field.
fn definition(field: TaskField) -> String {
    format!("{}|{:?}|{:?}|{}|{:?}", field.name(), field.param(), field.kind(), field.required(), field.default())
}

/// Groups of shared optional fields: each is the fields (in table order of the first type that
/// has them) that exactly the same types have, at least [`SHARED_BY_AT_LEAST`] of them.
struct Mixin {
    name: String,
    fields: Vec<TaskField>,
    types: Vec<&'static str>,
}

fn mixins() -> Vec<Mixin> {
    // definition -> (field, the types that have it)
    let mut holders: BTreeMap<String, (TaskField, Vec<&'static str>)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for task_type in task_types() {
        for field in task_type.fields().filter(|f| !f.required()) {
            let key = definition(field);
            if !holders.contains_key(&key) {
                order.push(key.clone());
            }
            holders.entry(key).or_insert_with(|| (field, Vec::new())).1.push(task_type.name());
        }
    }
    let mut groups: Vec<Mixin> = Vec::new();
    for key in order {
        let (field, types) = &holders[&key];
        if types.len() < SHARED_BY_AT_LEAST {
            continue;
        }
        match groups.iter_mut().find(|g| &g.types == types) {
            Some(group) => group.fields.push(*field),
            None => groups.push(Mixin { name: String::new(), fields: vec![*field], types: types.clone() }),
        }
    }
    for group in &mut groups {
        group.name = format!(
            "_With{}",
            group.fields.iter().map(|f| f.name().split('_').map(word).collect::<String>()).collect::<String>()
        );
    }
    groups
}

/// Whether a field stays out of `repr`: proxy credentials, cookies and images.
fn hidden(field: TaskField) -> bool {
    matches!(field.kind(), FieldKind::Proxy { .. } | FieldKind::Image(_) | FieldKind::Images { .. })
        || field.name() == "cookies"
}

fn python_type(field: TaskField) -> &'static str {
    match field.kind() {
        FieldKind::Text { .. } | FieldKind::Url { .. } | FieldKind::Proxy { .. } => "str",
        FieldKind::Choice { .. } | FieldKind::Upload { .. } => "str",
        FieldKind::Flag | FieldKind::Sync => "bool",
        FieldKind::Score { .. } => "float",
        FieldKind::Int { .. } => "int",
        FieldKind::Image(_) => "Image",
        FieldKind::Images { .. } => "list[Image]",
        other => crate::untaught(other, "python_types"),
    }
}

/// `1234567` as `1,234,567`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn size(bytes: usize) -> String {
    if bytes >= 1024 * 1024 && bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{} bytes", thousands(bytes))
    }
}

fn image_text(limits: ImageLimits) -> String {
    let sides =
        limits.max_side_px.map(|px| format!(", sides of at most {} px", thousands(px as usize))).unwrap_or_default();
    format!("a jpg, png or gif of {} to {}{sides}", size(limits.min_bytes), size(limits.max_bytes))
}

fn quoted(values: &[&str]) -> String {
    values.iter().map(|v| format!("``{v}``")).collect::<Vec<_>>().join(", ")
}

/// A field's docstring: what it takes (kind and limits), its default and its parameter.
fn field_doc(field: TaskField) -> String {
    let mut doc = match field.kind() {
        FieldKind::Text { max_chars } => {
            format!("Text of 1 to {} characters without control characters.", thousands(max_chars))
        }
        FieldKind::Url { max_chars } => {
            format!("An absolute ``http://`` or ``https://`` URL of at most {} characters.", thousands(max_chars))
        }
        FieldKind::Flag => "True or False.".to_owned(),
        FieldKind::Sync => "True: solve in the submit request itself (``solve.php``), with no polling.".to_owned(),
        FieldKind::Score { min_tenths, max_tenths } => format!("A score from 0.{min_tenths} to 0.{max_tenths}."),
        FieldKind::Choice { values } => format!("One of {} (any case).", quoted(values)),
        FieldKind::Upload { modes } => format!("How the image is sent: one of {} (any case).", quoted(modes)),
        FieldKind::Int { min, max } => format!("A whole number from {min} to {max}."),
        FieldKind::Proxy { max_chars } => format!(
            "``host:port`` or ``user:pass@host:port`` (at most {} characters; the scheme goes in ``proxytype``).",
            thousands(max_chars)
        ),
        FieldKind::Image(limits) => format!("An image, base64 text or raw bytes: {}.", image_text(limits)),
        FieldKind::Images { count, each } => {
            format!("Exactly {count} images, each base64 text or raw bytes: {}.", image_text(each))
        }
        other => crate::untaught(other, "python_types"),
    };
    if let Some(default) = field.default() {
        let _ = write!(doc, " Default ``{default}``.");
    }
    match field.param() {
        Some(param) => {
            let _ = write!(doc, " Sent as ``{param}``.");
        }
        None => doc.push_str(" Not sent as a parameter."),
    }
    if hidden(field) {
        doc.push_str(" Left out of ``repr``.");
    }
    doc
}

fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) { format!("{} s", ms / 1000) } else { format!("{ms} ms") }
}

fn class_doc(task_type: TaskType) -> Vec<String> {
    let answer = match task_type.answer() {
        AnswerShape::Text => "text".to_owned(),
        AnswerShape::Cells => "a JSON list of cell numbers (``Solution.answer_json``)".to_owned(),
        AnswerShape::Object([]) => "a JSON object (``Solution.answer_json``)".to_owned(),
        AnswerShape::Object(keys) => format!("a JSON object with {} (``Solution.answer_json``)", quoted(keys)),
        other => crate::untaught(other, "python_types"),
    };
    let lifetime = task_type
        .token_ttl_ms()
        .map(|ttl| format!(", usable for {} after it arrives", seconds(ttl)))
        .unwrap_or_default();
    vec![
        format!(
            "A ``{}`` task (CaptchaAI method ``{}``); the answer is {answer}{lifetime}.",
            task_type.name(),
            task_type.method()
        ),
        String::new(),
        format!(
            "Engine defaults (a :class:`Config` overrides them): first poll {} after the submit, then every {}; \
             deadline {} from the first submit.",
            seconds(task_type.first_wait_ms()),
            seconds(task_type.poll_interval_ms()),
            seconds(task_type.deadline_ms())
        ),
    ]
}

/// Text wrapped at `width` columns after `indent`, words kept whole.
fn wrap(text: &str, indent: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for w in text.split_whitespace() {
        if !line.is_empty() && indent.len() + line.len() + 1 + w.len() > width {
            lines.push(format!("{indent}{line}"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(w);
    }
    if !line.is_empty() {
        lines.push(format!("{indent}{line}"));
    }
    lines
}

/// A docstring of paragraphs at `indent` (one line when it fits).
fn docstring(out: &mut String, indent: &str, paragraphs: &[String]) {
    const WIDTH: usize = 110;
    if paragraphs.len() == 1 && indent.len() + paragraphs[0].len() + 6 <= WIDTH {
        let _ = writeln!(out, "{indent}\"\"\"{}\"\"\"", paragraphs[0]);
        return;
    }
    let mut lines: Vec<String> = Vec::new();
    for paragraph in paragraphs {
        if paragraph.is_empty() {
            lines.push(String::new());
        } else {
            lines.extend(wrap(paragraph, indent, WIDTH - 3));
        }
    }
    if let Some(first) = lines.first_mut() {
        *first = format!("{indent}\"\"\"{}", first.trim_start());
    }
    for line in lines {
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(out, "{indent}\"\"\"");
}

fn field_line(out: &mut String, field: TaskField, optional: bool) {
    let ty = python_type(field);
    let line = match (optional, hidden(field)) {
        (true, true) => format!("    {}: {ty} | None = field(default=None, repr=False)", field.name()),
        (true, false) => format!("    {}: {ty} | None = None", field.name()),
        (false, true) => format!("    {}: {ty} = field(repr=False)", field.name()),
        (false, false) => format!("    {}: {ty}", field.name()),
    };
    let _ = writeln!(out, "{line}");
    docstring(out, "    ", &[field_doc(field)]);
}

const HEADER: &str = r#"# Generated by `cargo xtask python-types` (xtask/src/python_types.rs) from the engine's type
# table (captchaai_engine::task_types, src/registry.rs). Do not edit: change the table and run it
# again; `cargo xtask python-types --check` fails while this file is stale.
"""Task dataclasses, one per captcha type of the engine's type table. Each has a JSON form
(:meth:`Task.to_dict`); plain dicts in the same form are accepted everywhere a task is.

Required fields are positional, optional ones keyword-only. Validation (lengths, URLs, proxies,
image formats, ranges) is the engine's: a bad task fails with a permanent error from the engine
naming the field, before anything is sent. ``extra`` passes further parameters through
(``soft_id``, ``pingback``, ...); the engine refuses any that would override a field or the key.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar

from ._task_base import Image, TaskBase, TaskLike, task_json, task_type
"#;

/// The whole generated module.
pub fn render() -> String {
    let mixins = mixins();
    let mut out = String::from(HEADER);
    let types: Vec<TaskType> = task_types().collect();

    let mut names: Vec<String> = vec!["Image".into(), "TASK_TYPES".into(), "Task".into(), "TaskLike".into()];
    names.extend(types.iter().map(|t| class_name(*t)));
    names.extend(ALIASES.iter().map(|(alias, _)| (*alias).to_owned()));
    names.extend(["task_json".to_owned(), "task_type".to_owned()]);
    names.sort_by_key(|n| n.to_lowercase());
    out.push_str("\n__all__ = [\n");
    for line in wrap(&names.iter().map(|n| format!("\"{n}\",")).collect::<Vec<_>>().join(" "), "    ", 110) {
        let _ = writeln!(out, "{line}");
    }
    out.push_str("]\n");

    let extra = types.first().map(|t| t.extra());
    out.push_str("\n\n@dataclass(frozen=True, repr=False)\nclass Task(TaskBase):\n");
    docstring(&mut out, "    ", &["Base class of every task: ``type`` is the engine's type name.".to_owned()]);
    out.push_str("\n    type: ClassVar[str] = \"\"\n    _: KW_ONLY\n    extra: dict[str, Any] | None = None\n");
    if let Some(extra) = extra {
        let mut engine_own: Vec<&str> = extra.engine_params.to_vec();
        engine_own.push(extra.file_param);
        docstring(
            &mut out,
            "    ",
            &[format!(
                "Pass-through ``in.php`` parameters: names of 1 to {} ASCII letters, digits, ``_`` or ``-`` \
                 that are neither the engine's own ({}) nor the type's fields or parameters (any case); values \
                 text without control characters (at most {} bytes of UTF-8), numbers, or booleans (sent as 1/0).",
                extra.max_name_bytes,
                quoted(&engine_own),
                thousands(extra.max_value_bytes)
            )],
        );
    }

    for mixin in &mixins {
        let _ = write!(out, "\n\n@dataclass(frozen=True, repr=False)\nclass {}(Task):\n", mixin.name);
        let fields: Vec<String> = mixin.fields.iter().map(|f| format!("``{}``", f.name())).collect();
        docstring(
            &mut out,
            "    ",
            &[format!(
                "The optional {} of the {} types that have them: {}.",
                fields.join(" and "),
                mixin.types.len(),
                mixin.types.iter().map(|t| format!("``{t}``")).collect::<Vec<_>>().join(", ")
            )],
        );
        out.push_str("\n    _: KW_ONLY\n");
        for field in &mixin.fields {
            field_line(&mut out, *field, true);
        }
    }

    for task_type in &types {
        let shared: Vec<&Mixin> = mixins.iter().filter(|m| m.types.contains(&task_type.name())).collect();
        let in_mixin = |f: TaskField| shared.iter().any(|m| m.fields.iter().any(|g| definition(*g) == definition(f)));
        let bases = if shared.is_empty() {
            "Task".to_owned()
        } else {
            shared.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")
        };
        let _ = write!(out, "\n\n@dataclass(frozen=True, repr=False)\nclass {}({bases}):\n", class_name(*task_type));
        docstring(&mut out, "    ", &class_doc(*task_type));
        let _ = write!(out, "\n    type: ClassVar[str] = \"{}\"\n", task_type.name());
        for field in task_type.fields().filter(|f| f.required()) {
            field_line(&mut out, field, false);
        }
        let optional: Vec<TaskField> = task_type.fields().filter(|f| !f.required() && !in_mixin(*f)).collect();
        if !optional.is_empty() {
            out.push_str("    _: KW_ONLY\n");
            for field in optional {
                field_line(&mut out, field, true);
            }
        }
    }

    out.push_str("\n\n");
    for (alias, target) in ALIASES {
        let target = types.iter().find(|t| t.name() == *target).map(|t| class_name(*t)).unwrap_or_default();
        let _ = writeln!(out, "{alias} = {target}");
    }
    out.push_str("\nTASK_TYPES: dict[str, type] = {\n");
    for task_type in &types {
        let _ = writeln!(out, "    \"{}\": {},", task_type.name(), class_name(*task_type));
    }
    out.push_str("}\n\"\"\"Every task class by its type name, in the engine's table order.\"\"\"\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_module_is_current() {
        let path = crate::generated::path(OUTPUT).unwrap();
        let committed = std::fs::read_to_string(&path).unwrap();
        assert!(committed == render(), "{} is stale: run `cargo xtask python-types`", path.display());
    }

    #[test]
    fn every_type_has_a_class_and_the_shared_fields_are_written_once() {
        let module = render();
        for task_type in task_types() {
            let class = format!("class {}(", class_name(task_type));
            assert_eq!(module.matches(&class).count(), 1, "{class}");
            assert!(module.contains(&format!("    \"{}\": {},", task_type.name(), class_name(task_type))));
        }
        for name in ["cookies", "user_agent", "extra"] {
            assert_eq!(module.matches(&format!("    {name}: ")).count(), 1, "{name}");
        }
        // Optional proxies are shared; the types that need one declare it as required.
        assert_eq!(module.matches("    proxy: str | None").count(), 1);
    }

    #[test]
    fn class_names_follow_the_spelling_table() {
        let names: Vec<String> = task_types().map(class_name).collect();
        for expected in ["RecaptchaV2EnterpriseTask", "GeeTestV3Task", "CaptchaFoxTask", "FriendlyCaptchaTask"] {
            assert!(names.iter().any(|n| n == expected), "{expected} in {names:?}");
        }
    }
}
