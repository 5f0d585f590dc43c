//! `cargo xtask ts-types`: writes the JavaScript package's task types,
//! `bindings/js/src/tasks.d.ts`, from the engine's read-only type listing
//! (`captchaai_engine::task_types`), the same listing `schema.rs` writes `edge/openapi.json` from.
//! Never written by hand: one interface per captcha type with its fields, requiredness, limits,
//! wire names and defaults as the table has them, the `Task` union over them, and the optional
//! fields several types share (`extra`, `cookies` and `user_agent`, `proxy` and `proxytype`)
//! written once, as interfaces the types extend.
//!
//! `cargo xtask ts-types --check` fails if the committed file differs from what would be
//! written; the unit test below does the same under `cargo test`.
//!
//! Each field gets the TypeScript type of its canonical spelling (text: `string`, flags:
//! `boolean`, numbers: `number`, choices: their values). The engine takes more (numbers for
//! text, `0`/`1` for flags, decimal text for numbers, any letter case for choices, `null` for a
//! field left out) and validates every task itself; the types steer to one spelling.

use anyhow::{Context, Result, bail};
use captchaai_engine::{AnswerShape, FieldKind, ImageLimits, TaskField, TaskType, task_types};

/// Where the generated declarations go, from the workspace root.
const OUTPUT: &str = "bindings/js/src/tasks.d.ts";

/// Optional (or required) fields several types share, declared once as an interface that each
/// type holding all of them, with this requiredness, extends. The fields' types and docs come
/// from the table; rendering fails if two types that share a group disagree on a field.
struct Group {
    name: &'static str,
    doc: &'static str,
    fields: &'static [&'static str],
    required: bool,
}

const GROUPS: &[Group] = &[
    Group {
        name: "BrowserFields",
        doc: "The browser context the solver should use, for types that take one.",
        fields: &["cookies", "user_agent"],
        required: false,
    },
    Group {
        name: "ProxyFields",
        doc: "A proxy for the solver, where a type may use one: give both fields or neither.",
        fields: &["proxy", "proxytype"],
        required: false,
    },
    Group {
        name: "RequiredProxyFields",
        doc: "The proxy the solver must use, for types that need one.",
        fields: &["proxy", "proxytype"],
        required: true,
    },
];

/// Choice fields whose values get a named type alias: (alias, field name). Every type with the
/// field must list the same values.
const ALIASES: &[(&str, &str)] = &[("ProxyType", "proxytype")];

pub fn ts_types() -> Result<()> {
    crate::generated::write_or_check(OUTPUT, &render()?, "ts-types", "task types")
}

/// The whole `tasks.d.ts`.
pub fn render() -> Result<String> {
    let types: Vec<TaskType> = task_types().collect();
    let mut out = String::from(HEADER);

    let extra = types.first().context("the engine lists no task types")?.extra();
    if types.iter().any(|t| t.extra() != extra) {
        bail!("the types have different `extra` rules; tasks.d.ts declares one `Extra`");
    }
    let mut engine_names: Vec<String> = extra.engine_params.iter().map(|p| format!("`{p}`")).collect();
    engine_names.push(format!("`{}`", extra.file_param));
    out.push_str(&doc(
        "",
        &format!(
            "Pass-through `in.php` parameters (`soft_id`, `pingback`, ...): names of 1 to {} ASCII letters, digits, \
             `_` or `-`, never {} nor one of the type's own fields or parameters (in any case); values are text \
             without control characters (at most {} of UTF-8), numbers, or booleans (sent as 1 or 0).",
            extra.max_name_bytes,
            or_list(&engine_names),
            bytes(extra.max_value_bytes),
        ),
    ));
    out.push_str("export type Extra = Record<string, string | number | boolean>;\n\n");

    for (alias, field_name) in ALIASES {
        let field = shared_field(&types, field_name, None)?
            .with_context(|| format!("no type has the field `{field_name}` that `{alias}` names"))?;
        out.push_str(&doc("", &format!("The values of `{field_name}`.")));
        out.push_str(&format!("export type {alias} = {};\n\n", literal_union(field.kind())?));
    }

    out.push_str(&doc("", "What every task may hold besides its type's fields."));
    out.push_str("export interface TaskBase {\n");
    out.push_str(&doc("  ", "Pass-through parameters; see `Extra`."));
    out.push_str("  extra?: Extra;\n}\n\n");

    for group in GROUPS {
        if !types.iter().any(|t| uses(*t, group)) {
            continue;
        }
        out.push_str(&doc("", group.doc));
        out.push_str(&format!("export interface {} {{\n", group.name));
        for name in group.fields {
            let field = shared_field(&types, name, Some(group.required))?.context("a group's field")?;
            out.push_str(&field_decl(field)?);
        }
        out.push_str("}\n\n");
    }

    let mut names = Vec::new();
    for spec in &types {
        let name = interface_name(*spec);
        if names.contains(&name) {
            bail!("two types map to the interface name {name}");
        }
        let mut extends = vec!["TaskBase"];
        extends.extend(GROUPS.iter().filter(|g| uses(*spec, g)).map(|g| g.name));
        out.push_str(&doc("", &type_doc(*spec)));
        out.push_str(&format!("export interface {name} extends {} {{\n", extends.join(", ")));
        out.push_str(&format!("  type: {};\n", ts_string(spec.name())));
        for field in spec.fields() {
            if !GROUPS.iter().any(|g| uses(*spec, g) && g.fields.contains(&field.name())) {
                out.push_str(&field_decl(field)?);
            }
        }
        out.push_str("}\n\n");
        names.push(name);
    }

    out.push_str(&doc("", "A captcha to solve: a task of one of the types above, told apart by `type`."));
    out.push_str("export type Task =\n");
    for (i, name) in names.iter().enumerate() {
        let end = if i + 1 == names.len() { ";" } else { "" };
        out.push_str(&format!("  | {name}{end}\n"));
    }
    out.push('\n');
    out.push_str(&doc("", "The `type` of every captcha type the engine solves."));
    out.push_str("export type TaskType = Task['type'];\n\n");
    out.push_str(&doc("", "The task of one type: `TaskOf<'turnstile'>` is `TurnstileTask`."));
    out.push_str("export type TaskOf<T extends TaskType> = Extract<Task, { type: T }>;\n");
    Ok(out)
}

const HEADER: &str = "\
// Generated by `cargo xtask ts-types` from the engine's type table (src/registry.rs, read through
// `captchaai_engine::task_types`, as edge/openapi.json is): do not edit. `cargo xtask ts-types
// --check` and `cargo test -p xtask` fail when it is stale.
//
// Each field has the type of its canonical spelling. The engine also takes numbers for text,
// 0/1 or \"true\"/\"false\" for flags, decimal text for numbers, any letter case for choices and
// null for a field left out; it validates every task and names the field at fault.

";

/// Whether `spec` extends `group`: it has every field of the group, with the group's
/// requiredness.
fn uses(spec: TaskType, group: &Group) -> bool {
    group.fields.iter().all(|name| spec.field(name).is_some_and(|f| f.required() == group.required))
}

/// The field `name` as every type that has it (with this requiredness, when given) declares
/// it; an error if they differ, `None` if no type has it.
fn shared_field(types: &[TaskType], name: &str, required: Option<bool>) -> Result<Option<TaskField>> {
    let mut found: Option<(TaskType, TaskField)> = None;
    for spec in types {
        let Some(field) = spec.field(name).filter(|f| required.is_none_or(|r| f.required() == r)) else {
            continue;
        };
        match found {
            None => found = Some((*spec, field)),
            Some((first, seen)) => {
                if field.kind() != seen.kind() || field.param() != seen.param() || field.default() != seen.default() {
                    bail!(
                        "the field `{name}` differs between `{}` and `{}`, so it cannot be declared once",
                        first.name(),
                        spec.name()
                    );
                }
            }
        }
    }
    Ok(found.map(|(_, field)| field))
}

/// `  /** doc */\n  name?: type;\n`.
fn field_decl(field: TaskField) -> Result<String> {
    let optional = if field.required() { "" } else { "?" };
    let ty = ALIASES
        .iter()
        .find(|(_, name)| *name == field.name())
        .map(|(alias, _)| Ok((*alias).to_owned()))
        .unwrap_or_else(|| ts_type(field.kind()))?;
    Ok(format!("{}  {}{optional}: {ty};\n", doc("  ", &field_doc(field)), property_name(field.name())))
}

/// The TypeScript type of a field's canonical spelling.
fn ts_type(kind: FieldKind) -> Result<String> {
    Ok(match kind {
        FieldKind::Text { .. } | FieldKind::Url { .. } | FieldKind::Proxy { .. } | FieldKind::Image(_) => {
            "string".to_owned()
        }
        FieldKind::Flag | FieldKind::Sync => "boolean".to_owned(),
        FieldKind::Score { .. } | FieldKind::Int { .. } => "number".to_owned(),
        FieldKind::Choice { .. } | FieldKind::Upload { .. } => literal_union(kind)?,
        FieldKind::Images { .. } => "string[]".to_owned(),
        other => bail!("ts_types cannot render {other:?} yet: teach it (xtask/src/ts_types.rs)"),
    })
}

/// `'a' | 'b'` for a choice's values.
fn literal_union(kind: FieldKind) -> Result<String> {
    let values = match kind {
        FieldKind::Choice { values } => values,
        FieldKind::Upload { modes } => modes,
        other => bail!("{other:?} is not a choice"),
    };
    if values.is_empty() {
        bail!("a choice without values");
    }
    Ok(values.iter().map(|v| ts_string(v)).collect::<Vec<_>>().join(" | "))
}

/// What a field holds, its limits, how it is sent and its default.
fn field_doc(field: TaskField) -> String {
    let mut text = match field.kind() {
        FieldKind::Text { max_chars } => format!("Text of 1 to {} characters.", number(max_chars)),
        FieldKind::Url { max_chars } => {
            format!("An absolute http:// or https:// URL, at most {} characters.", number(max_chars))
        }
        FieldKind::Flag => "A flag: `true` sends 1, `false` sends nothing.".to_owned(),
        FieldKind::Score { min_tenths, max_tenths } => format!("A score from 0.{min_tenths} to 0.{max_tenths}."),
        FieldKind::Choice { values } => format!("One of {}.", or_list(&quoted(values))),
        FieldKind::Int { min, max } => format!("A whole number from {min} to {max}."),
        FieldKind::Proxy { max_chars } => format!(
            "`host:port` or `user:pass@host:port`, at most {} characters (the scheme goes in `proxytype`).",
            number(max_chars)
        ),
        FieldKind::Image(limits) => format!("A base64 {}.", image(limits)),
        FieldKind::Images { count, each } => format!("Exactly {count} base64 images, each {}.", image(each)),
        FieldKind::Upload { modes } => {
            format!("How the image is sent: {}. Not sent as a parameter.", or_list(&quoted(modes)))
        }
        FieldKind::Sync => "Solve synchronously through `solve.php` (no polling). Not sent as a parameter.".to_owned(),
        other => crate::untaught(other, "ts_types"),
    };
    if let Some(param) = field.param() {
        text.push_str(&format!(" Sent as `{param}`."));
    }
    if let Some(default) = field.default() {
        text.push_str(&format!(" Default `{default}`."));
    }
    text
}

/// `JPEG, PNG or GIF of 100 bytes to 1 MiB (decoded)`, with the side limit where there is one.
fn image(limits: ImageLimits) -> String {
    let mut text = format!(
        "JPEG, PNG or GIF of {} to {} decoded (a `data:` prefix and whitespace are ignored)",
        bytes(limits.min_bytes),
        bytes(limits.max_bytes)
    );
    if let Some(side) = limits.max_side_px {
        text.push_str(&format!(", at most {}{KEEP}px a side", number(side as usize)));
    }
    text
}

/// A type's doc: method, fixed parameters, answer, token lifetime and timings.
fn type_doc(spec: TaskType) -> String {
    let mut text = format!("The `{}` type: CaptchaAI method `{}`", spec.name(), spec.method());
    let fixed: Vec<String> = spec.fixed_params().iter().map(|(k, v)| format!("`{k}={v}`")).collect();
    if !fixed.is_empty() {
        text.push_str(&format!(" with {}", and_list(&fixed)));
    }
    text.push_str(". ");
    text.push_str(&match spec.answer() {
        AnswerShape::Text => "The answer is a token or text (`Solution.answer` is a string)".to_owned(),
        AnswerShape::Cells => "The answer is a list of cell numbers (`Solution.answer` is an array)".to_owned(),
        AnswerShape::Object([]) => "The answer is a JSON object".to_owned(),
        AnswerShape::Object(keys) => format!("The answer is a JSON object with {}", and_list(&quoted(keys))),
        other => crate::untaught(other, "ts_types"),
    });
    match spec.token_ttl_ms() {
        Some(ttl) => text.push_str(&format!(", usable for {} after it arrives. ", duration(ttl))),
        None => text.push_str(". "),
    }
    text.push_str(&format!(
        "Defaults: first poll {} after the submit, then every {}; deadline {}.",
        duration(spec.first_wait_ms()),
        duration(spec.poll_interval_ms()),
        duration(spec.deadline_ms())
    ));
    text
}

/// `recaptcha_v2_enterprise` -> `RecaptchaV2EnterpriseTask`.
fn interface_name(spec: TaskType) -> String {
    let mut name: String = spec
        .name()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect();
    name.push_str("Task");
    name
}

/// A property name: bare where it is an identifier, else a string.
fn property_name(name: &str) -> String {
    let identifier = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if identifier { name.to_owned() } else { ts_string(name) }
}

/// A single-quoted TypeScript string.
fn ts_string(text: &str) -> String {
    let mut out = String::from("'");
    for c in text.chars() {
        match c {
            '\'' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A space [`doc`] never breaks a line at (between a number and its unit).
const KEEP: char = '\u{1}';

/// A JSDoc comment at `indent`, wrapped at about 100 columns.
fn doc(indent: &str, text: &str) -> String {
    let text = text.replace("*/", "*\\/");
    let width = 100usize.saturating_sub(indent.len() + 3);
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("one line");
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(word.to_owned());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    let lines: Vec<String> = lines.iter().map(|line| line.replace(KEEP, " ")).collect();
    if lines.len() == 1 && indent.len() + lines[0].len() + 7 <= 100 {
        return format!("{indent}/** {} */\n", lines[0]);
    }
    let mut out = format!("{indent}/**\n");
    for line in lines {
        out.push_str(&format!("{indent} * {line}\n"));
    }
    out.push_str(&format!("{indent} */\n"));
    out
}

fn quoted(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| format!("`{v}`")).collect()
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(items: &[String]) -> String {
    joined(items, "or")
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    joined(items, "and")
}

fn joined(items: &[String], word: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} {word} {last}", rest.join(", ")),
    }
}

/// `16,384`.
fn number(n: usize) -> String {
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

/// `100 bytes`, `64 KiB`, `1 MiB` (kept on one line by [`doc`]).
fn bytes(n: usize) -> String {
    const KIB: usize = 1024;
    if n >= KIB * KIB && n.is_multiple_of(KIB * KIB) {
        format!("{}{KEEP}MiB", n / (KIB * KIB))
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{}{KEEP}KiB", n / KIB)
    } else {
        format!("{}{KEEP}bytes", number(n))
    }
}

/// `26 s`, `1.5 s`, `250 ms` (kept on one line by [`doc`]).
fn duration(ms: u64) -> String {
    if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{}{KEEP}s", ms / 1000)
    } else if ms >= 1000 {
        format!("{}{KEEP}s", ms as f64 / 1000.0)
    } else {
        format!("{ms}{KEEP}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed bindings/js/src/tasks.d.ts is exactly what `cargo xtask ts-types` writes.
    #[test]
    fn committed_types_are_generated() {
        let path = crate::generated::path(OUTPUT).unwrap();
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        let generated = render().unwrap();
        assert!(generated == committed, "{} is stale: run `cargo xtask ts-types`", path.display());
    }

    /// Every type and every field of the table is declared, required fields without `?`, and
    /// each shared field exactly once.
    #[test]
    fn every_type_and_field_is_declared() {
        let text = render().unwrap();
        for spec in task_types() {
            let name = interface_name(spec);
            assert!(text.contains(&format!("export interface {name} extends TaskBase")), "{name}");
            assert!(text.contains(&format!("  | {name}")), "{name} in Task");
            assert!(text.contains(&format!("  type: '{}';", spec.name())), "{}", spec.name());
            let body = text.split(&format!("export interface {name} ")).nth(1).unwrap().split("\n}\n").next().unwrap();
            for field in spec.fields() {
                let grouped = GROUPS.iter().find(|g| uses(spec, g) && g.fields.contains(&field.name()));
                let optional = if field.required() { "" } else { "?" };
                let line = format!("  {}{optional}: ", field.name());
                match grouped {
                    Some(group) => {
                        assert!(body.contains(group.name), "{} extends {}", spec.name(), group.name);
                        assert!(!body.contains(&line), "{} repeats {}", spec.name(), field.name());
                    }
                    None => assert!(body.contains(&line), "{}.{}", spec.name(), field.name()),
                }
            }
        }
        for shared in ["  cookies?: ", "  user_agent?: ", "  extra?: ", "  proxy?: ", "  proxytype?: "] {
            assert_eq!(text.matches(shared).count(), 1, "{shared:?} written once");
        }
    }

    #[test]
    fn helpers() {
        assert_eq!(number(16_384), "16,384");
        assert_eq!(number(100), "100");
        let spaced = |text: String| text.replace(KEEP, " ");
        assert_eq!(spaced(bytes(1024 * 1024)), "1 MiB");
        assert_eq!(spaced(bytes(64 * 1024)), "64 KiB");
        assert_eq!(spaced(bytes(100)), "100 bytes");
        assert_eq!(spaced(duration(26_000)), "26 s");
        assert_eq!(spaced(duration(1_500)), "1.5 s");
        assert_eq!(doc("", &format!("a{KEEP}b")), "/** a b */\n");
        assert_eq!(ts_string("it's"), "'it\\'s'");
        assert_eq!(property_name("data-s"), "'data-s'");
        assert_eq!(or_list(&["a".into(), "b".into(), "c".into()]), "a, b or c");
        assert!(doc("", "x */ y").contains("x *\\/ y"));
    }
}
