//! JSON Schemas of task JSON, derived from the engine's read-only type listing
//! (`captchaai_engine::task_types`) and its limits, never written by hand: one schema per captcha
//! type and a `oneOf` over them with a `type` discriminator, in OpenAPI 3.0 form (`nullable`, no
//! type lists) for `edge/openapi.json` (`cargo xtask openapi` writes them there).
//!
//! Contract: every task valid against its type's schema is accepted by `captchaai_engine::Task`
//! validation (patterns read with ECMA-262 semantics, where `$` is the end of the text). Where
//! the validator takes more than JSON Schema can say exactly, the schema says less: images are
//! plain base64 without a `data:` prefix or whitespace, BLS images are GIF or PNG whose header
//! shows sides of at most 767 px when the limit is 1,000, `min_score` strings are plain
//! decimals, numbers for short text fields are integers written as such, and `extra` is left out (its exact rules, in the `x-extra` extension, need
//! `propertyNames`, which OpenAPI 3.0 lacks).

use captchaai_engine::{FieldKind, ImageFormat, ImageLimits, TaskField, TaskType, task_types};
use serde_json::{Map, Value, json};

/// Control characters (`char::is_control`: Unicode category Cc).
const CONTROL: &[(u32, u32)] = &[(0x00, 0x1F), (0x7F, 0x9F)];
/// `char::is_whitespace` (Unicode White_Space), what `str::trim` removes.
const WHITESPACE: &[(u32, u32)] = &[
    (0x09, 0x0D),
    (0x20, 0x20),
    (0x85, 0x85),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
];

/// The longest text a JSON number can become (`-2.2250738585072014e-308`); a text field at
/// least this long takes any number.
const LONGEST_NUMBER_TEXT: usize = 24;

/// The component schemas: `Task` (a `oneOf` over the types, discriminated by `type`) and one
/// `Task_<type>` per registry row, in table order of `oneOf`.
pub fn task_schemas() -> Value {
    let mut schemas = Map::new();
    let mut one_of = Vec::new();
    let mut mapping = Map::new();
    for task_type in task_types() {
        let name = component_name(task_type);
        let reference = format!("#/components/schemas/{name}");
        one_of.push(json!({ "$ref": reference }));
        mapping.insert(task_type.name().to_owned(), Value::String(reference));
        schemas.insert(name, task_schema(task_type));
    }
    schemas.insert(
        "Task".to_owned(),
        json!({
            "description": "A captcha task: `type` plus that type's fields, and an optional `extra` object of \
                pass-through parameters. Generated from the engine's type table (src/registry.rs) by \
                `cargo xtask openapi`; every task valid against it passes the engine's validation.",
            "oneOf": one_of,
            "discriminator": { "propertyName": "type", "mapping": mapping },
        }),
    );
    Value::Object(schemas)
}

/// The component name of a type's schema: `Task_<type>`.
pub fn component_name(task_type: TaskType) -> String {
    format!("Task_{}", task_type.name())
}

/// The schema of one type's task JSON.
pub fn task_schema(spec: TaskType) -> Value {
    let mut properties = Map::new();
    properties.insert("type".to_owned(), json!({ "type": "string", "enum": [spec.name()] }));
    let mut required = vec![Value::String("type".to_owned())];
    for field in spec.fields() {
        let mut schema = field_schema(field);
        if field.required() {
            required.push(Value::String(field.name().to_owned()));
        } else {
            // A null optional field counts as left out.
            schema = nullable(schema);
        }
        if let (Some(default), Value::Object(object)) = (field.default(), &mut schema) {
            object.insert("default".to_owned(), Value::String(default.to_owned()));
        }
        properties.insert(field.name().to_owned(), schema);
    }
    let mut schema = json!({
        "type": "object",
        "description": format!(
            "A `{}` task (CaptchaAI method `{}`). Unknown fields are refused. The engine also takes an optional \
             `extra` object of pass-through parameters, whose exact rules are in `x-extra`: they need \
             `propertyNames`, which OpenAPI 3.0 lacks, so this schema leaves `extra` out rather than admit \
             names the engine refuses.",
            spec.name(),
            spec.method()
        ),
        "required": required,
        "properties": properties,
        "additionalProperties": false,
        "x-extra": extra_schema(spec),
    });
    let combinations = combinations(spec);
    if !combinations.is_empty() {
        schema["allOf"] = Value::Array(combinations);
    }
    schema
}

/// Rules between fields, as `Task`'s combination checks apply them: `proxy` and `proxytype`
/// both or neither; `min_len` at most `max_len` when `max_len` is above 0.
fn combinations(spec: TaskType) -> Vec<Value> {
    let mut rules = Vec::new();
    if let (Some(proxy), Some(proxytype)) = (spec.field("proxy"), spec.field("proxytype"))
        && !(proxy.required() && proxytype.required())
    {
        rules.push(json!({
            "description": "`proxy` and `proxytype` go together.",
            "anyOf": [
                {
                    "required": ["proxy", "proxytype"],
                    "properties": { "proxy": { "type": "string" }, "proxytype": { "type": "string" } },
                },
                { "properties": { "proxy": null_only(), "proxytype": null_only() } },
            ],
        }));
    }
    if let (Some(min), Some(max)) = (spec.field("min_len"), spec.field("max_len"))
        && let (FieldKind::Int { min: min_lo, max: min_hi }, FieldKind::Int { min: max_lo, max: max_hi }) =
            (min.kind(), max.kind())
    {
        let mut branches = vec![
            json!({ "properties": { "min_len": null_only() } }),
            json!({ "properties": { "max_len": null_only() } }),
        ];
        for m in max_lo..=max_hi {
            if m <= 0 {
                branches.push(json!({ "properties": { "max_len": int_schema(m, m) } }));
            } else if min_lo <= m {
                branches.push(json!({
                    "properties": { "max_len": int_schema(m, m), "min_len": int_schema(min_lo, m.min(min_hi)) },
                }));
            }
        }
        rules.push(json!({
            "description": "`min_len` is at most `max_len` when `max_len` is above 0.",
            "anyOf": branches,
        }));
    }
    rules
}

/// The schema of one field's value (without null).
fn field_schema(field: TaskField) -> Value {
    let param = field.param().map(|param| format!(" Sent as `{param}`.")).unwrap_or_default();
    let mut schema = match field.kind() {
        FieldKind::Text { max_chars } => text_schema(max_chars),
        FieldKind::Url { max_chars } => json!({
            "type": "string",
            "maxLength": max_chars,
            "pattern": url_pattern(),
            "description": "An absolute http:// or https:// URL with a host and no spaces.",
        }),
        FieldKind::Flag | FieldKind::Sync => json!({
            "anyOf": [
                { "type": "boolean" },
                { "type": "integer", "enum": [0, 1] },
                { "type": "string", "pattern": format!("^(?:0|1|{}|{})$", any_case("true"), any_case("false")) },
            ],
            "description": "true or false (also 0/1, \"true\"/\"false\").",
        }),
        FieldKind::Score { min_tenths, max_tenths } => score_schema(min_tenths, max_tenths),
        FieldKind::Choice { values } => choice_schema(values),
        FieldKind::Upload { modes } => choice_schema(modes),
        FieldKind::Int { min, max } => int_schema(min, max),
        FieldKind::Proxy { max_chars } => json!({
            "type": "string",
            "maxLength": max_chars,
            "pattern": proxy_pattern(),
            "description": "host:port or user:pass@host:port (the scheme goes in `proxytype`).",
        }),
        FieldKind::Image(limits) => image_schema(limits),
        FieldKind::Images { count, each } => json!({
            "type": "array",
            "minItems": count,
            "maxItems": count,
            "items": image_schema(each),
            "description": format!("Exactly {count} base64 images."),
        }),
        other => crate::untaught(other, "schema"),
    };
    if let Some(object) = schema.as_object_mut() {
        let text = object.get("description").and_then(Value::as_str).unwrap_or("").to_owned();
        let text = format!("{text}{param}").trim().to_owned();
        if !text.is_empty() {
            object.insert("description".to_owned(), Value::String(text));
        }
    }
    schema
}

/// Null alone, in OpenAPI 3.0 form.
fn null_only() -> Value {
    json!({ "type": "string", "nullable": true, "enum": [null] })
}

/// The schema or null.
fn nullable(schema: Value) -> Value {
    json!({ "anyOf": [schema, null_only()] })
}

/// Non-empty text without control characters, at most `max` characters; or a JSON number
/// whose decimal text fits.
fn text_schema(max: usize) -> Value {
    let allowed = format!("[^{}]", class_body(CONTROL));
    let visible = format!("[^{}{}]", class_body(CONTROL), class_body(WHITESPACE));
    let text = json!({
        "type": "string",
        "minLength": 1,
        "maxLength": max,
        "pattern": format!("^{allowed}*{visible}{allowed}*$"),
    });
    let number = if max >= LONGEST_NUMBER_TEXT {
        Some(json!({ "type": "number" }))
    } else if max > 1 {
        // Whole numbers whose decimal text (as JSON writes integers) fits: up to `max` digits,
        // or a minus and `max - 1`. (The same value spelled as a float, `1e15` or `10.0`, reads
        // as `1000000000000000.0` and may not fit: JSON Schema cannot tell spellings apart.)
        let digits = |n: usize| 10_i64.checked_pow(u32::try_from(n).unwrap_or(u32::MAX)).map_or(i64::MAX, |p| p - 1);
        Some(json!({ "type": "integer", "minimum": -digits(max - 1), "maximum": digits(max) }))
    } else {
        None
    };
    let description = format!("Text of 1 to {max} characters, no control characters.");
    match number {
        Some(number) => json!({ "anyOf": [text, number], "description": description }),
        None => {
            let mut text = text;
            text["description"] = Value::String(description);
            text
        }
    }
}

/// A whole number from `lo` to `hi`, as a JSON integer or a decimal string (whitespace
/// around it, a sign and leading zeros allowed, as Rust's `i64` parsing of trimmed text).
fn int_schema(lo: i64, hi: i64) -> Value {
    let mut alternatives = Vec::new();
    if (lo..=hi).contains(&0) {
        alternatives.push("[+-]?0+".to_owned());
    }
    let positive: Vec<String> = (lo.max(1)..=hi).map(|n| n.to_string()).collect();
    if !positive.is_empty() {
        alternatives.push(format!("\\+?0*(?:{})", positive.join("|")));
    }
    let negative: Vec<String> = (lo..=hi.min(-1)).map(|n| n.unsigned_abs().to_string()).collect();
    if !negative.is_empty() {
        alternatives.push(format!("-0*(?:{})", negative.join("|")));
    }
    let trim = format!("[{}]*", class_body(WHITESPACE));
    json!({
        "anyOf": [
            { "type": "integer", "minimum": lo, "maximum": hi },
            { "type": "string", "pattern": format!("^{trim}(?:{}){trim}$", alternatives.join("|")) },
        ],
        "description": format!("A whole number from {lo} to {hi}."),
    })
}

/// One of `options` (any ASCII case, whitespace around it ignored).
fn choice_schema(options: &[&str]) -> Value {
    let trim = format!("[{}]*", class_body(WHITESPACE));
    let any: Vec<String> = options.iter().map(|o| any_case(o)).collect();
    json!({
        "anyOf": [
            { "type": "string", "enum": options },
            { "type": "string", "pattern": format!("^{trim}(?:{}){trim}$", any.join("|")) },
        ],
        "description": format!("One of {} (any case).", options.join(", ")),
    })
}

/// A score in tenths' range: a JSON number, or a decimal string.
fn score_schema(lo: u8, hi: u8) -> Value {
    let trim = format!("[{}]*", class_body(WHITESPACE));
    let below = if hi > lo { format!("[{lo}-{}][0-9]*|", hi - 1) } else { String::new() };
    json!({
        "anyOf": [
            { "type": "number", "minimum": f64::from(lo) / 10.0, "maximum": f64::from(hi) / 10.0 },
            { "type": "string", "pattern": format!("^{trim}0\\.(?:{below}{hi}0*){trim}$") },
        ],
        "description": format!("A score from 0.{lo} to 0.{hi}."),
    })
}

/// `http://` or `https://` (any case), an authority whose host (after the last `@`) is not
/// empty and does not start with `:`, then anything; no whitespace or control characters.
fn url_pattern() -> String {
    let bad = format!("{}{}", class_body(CONTROL), class_body(WHITESPACE));
    format!(
        "^{}(?:{})?://(?:[^/?#{bad}]*@)?[^/?#@:{bad}][^/?#@{bad}]*(?:[/?#][^{bad}]*)?$",
        any_case("http"),
        any_case("s")
    )
}

/// `host:port` or `user:pass@host:port`: host a name of 1-253 letters, digits, `.`, `-`, `_`
/// or a bracketed IPv6 address; port 1-65535. (Without `/`, so no scheme can appear.)
fn proxy_pattern() -> String {
    let bad = format!("/{}{}", class_body(CONTROL), class_body(WHITESPACE));
    let port = "0*(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])";
    format!("^(?:[^:{bad}]+:[^{bad}]*@)?(?:\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9._-]{{1,253}}):{port}$")
}

/// What one byte of an image's start may be.
#[derive(Clone, Copy)]
enum Byte {
    Is(u8),
    Any,
    /// At most this value, which is below 4 (its bits never straddle two base64 characters,
    /// so the per-character classes describe exactly this set).
    AtMost(u8),
}

/// The allowed starts of an image: each accepted signature, and for a side limit only the
/// formats whose header the engine reads (GIF, PNG) with both sides within it.
fn image_rules(max_side: Option<u32>) -> Vec<Vec<Byte>> {
    let mut starts = Vec::new();
    for (magic, format) in ImageFormat::signatures() {
        let mut rule: Vec<Byte> = magic.iter().map(|b| Byte::Is(*b)).collect();
        if let Some(max) = max_side {
            // The high byte of a side at most `high` keeps it at most 256 * (high + 1) - 1.
            let high = u8::try_from(((max + 1) / 256).saturating_sub(1).min(3)).unwrap_or(0);
            if max < 255 {
                continue;
            }
            match format {
                // Width and height: little-endian u16 at bytes 6 and 8.
                ImageFormat::Gif => rule.extend([Byte::Any, Byte::AtMost(high), Byte::Any, Byte::AtMost(high)]),
                // IHDR: big-endian u32 width and height at bytes 16 and 20.
                ImageFormat::Png => {
                    rule.resize(16, Byte::Any);
                    for _ in 0..2 {
                        rule.extend([Byte::Is(0), Byte::Is(0), Byte::AtMost(high), Byte::Any]);
                    }
                }
                ImageFormat::Jpeg => continue,
                other => crate::untaught(other, "schema"),
            }
        }
        starts.push(rule);
    }
    starts
}

/// A base64 image within `limits`: its start follows one of [`image_rules`], and the pattern
/// holds the lower bound of its size (whole groups of 4 characters, then an optional last group
/// of 2 or 3 with optional right padding), `maxLength` the upper one (a bounded repeat of some
/// 350,000 groups is more than some generators take).
fn image_schema(limits: ImageLimits) -> Value {
    let starts = image_rules(limits.max_side_px);
    let (min, max) = (limits.min_bytes, limits.max_bytes);
    let alternatives: Vec<String> = starts
        .iter()
        .map(|rule| {
            let (prefix, prefix_groups) = base64_prefix(rule);
            // A last group of 2 or 3 characters adds 1 or 2 bytes to the 3 of each whole group.
            let body: Vec<String> = [(0, ""), (1, "{B64}{2}(?:==)?"), (2, "{B64}{3}=?")]
                .iter()
                .filter_map(|&(extra, tail)| {
                    let fewest = min.saturating_sub(extra).div_ceil(3).checked_sub(prefix_groups)?;
                    Some(format!("(?:{{B64}}{{4}}){{{fewest},}}{tail}"))
                })
                .collect();
            format!("{prefix}(?:{})", body.join("|"))
        })
        .collect();
    let (min_len, max_len) = base64_lengths(min, max);
    json!({
        "type": "string",
        "minLength": min_len,
        "maxLength": max_len,
        "pattern": format!("^(?:{})$", alternatives.join("|")).replace("{B64}", BASE64_CHAR),
        "description": format!(
            "A base64 image (jpg, png or gif; standard or URL-safe alphabet, no whitespace or `data:` prefix), \
             {min} to {max} bytes decoded."
        ),
    })
}

/// Any base64 character, standard or URL-safe.
const BASE64_CHAR: &str = "[A-Za-z0-9+/_-]";

/// The base64 characters for bytes following `rule`, padded with any bytes to whole groups
/// of 3 bytes (4 characters), one character class per character; and how many groups.
fn base64_prefix(rule: &[Byte]) -> (String, usize) {
    let mut rule = rule.to_vec();
    rule.resize(rule.len().div_ceil(3) * 3, Byte::Any);
    let allowed = |b: Byte| -> Vec<u8> {
        match b {
            Byte::Is(v) => vec![v],
            Byte::Any => (0..=255).collect(),
            Byte::AtMost(v) => (0..=v).collect(),
        }
    };
    let mut out = String::new();
    for group in rule.chunks(3) {
        for c in 0..4 {
            let mut seen = [false; 64];
            // Character c of a group holds bits 6c..6c+6 of the group's 24 bits: of byte
            // (6c)/8 and, where it straddles, the next one.
            let (first, last) = ((6 * c) / 8, (6 * c + 5) / 8);
            let seconds = if last == first { vec![0] } else { allowed(group[last]) };
            for a in allowed(group[first]) {
                for &b in &seconds {
                    let mut bits = u32::from(a) << (16 - 8 * first);
                    if last != first {
                        bits |= u32::from(b) << (16 - 8 * last);
                    }
                    seen[((bits >> (18 - 6 * c)) & 63) as usize] = true;
                }
            }
            out.push_str(&base64_class(&seen));
        }
    }
    (out, rule.len() / 3)
}

/// A character class of these base64 values (standard and URL-safe spellings), runs of
/// letters or digits written as ranges.
fn base64_class(seen: &[bool; 64]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if seen.iter().all(|s| *s) {
        return BASE64_CHAR.to_owned();
    }
    let mut chars = String::new();
    let mut i = 0;
    while i < 64 {
        if !seen[i] {
            i += 1;
            continue;
        }
        let mut j = i;
        // A run within one of A-Z, a-z, 0-9 (indices 0-25, 26-51, 52-61).
        while j + 1 < 62 && seen[j + 1] && ALPHABET[j + 1] == ALPHABET[j] + 1 {
            j += 1;
        }
        match (ALPHABET[i], j - i) {
            (b'+', _) => chars.push_str("+\\-"),
            (b'/', _) => chars.push_str("/_"),
            (c, 0) => chars.push(char::from(c)),
            (c, 1) => chars.extend([char::from(c), char::from(ALPHABET[j])]),
            (c, _) => chars.extend([char::from(c), '-', char::from(ALPHABET[j])]),
        }
        i = j + 1;
    }
    if chars.len() == 1 { chars } else { format!("[{chars}]") }
}

/// The fewest and most characters of base64 text (no whitespace, padding optional but
/// right when given) that decodes to `min..=max` bytes: every such text of a length between
/// them does, and no shorter or longer one does.
fn base64_lengths(min: usize, max: usize) -> (usize, usize) {
    // (fewest, most) bytes from a valid text of n characters; None where none is valid.
    let bytes = |n: usize| -> Option<(usize, usize)> {
        let full = 3 * (n / 4);
        match n % 4 {
            0 if n >= 4 => Some((full - 2, full)), // "xx==" or "xxx=" end
            0 => Some((0, 0)),
            2 => Some((full + 1, full + 1)),
            3 => Some((full + 2, full + 2)),
            _ => None,
        }
    };
    let mut shortest = (min * 4 / 3).saturating_sub(8);
    while bytes(shortest).is_none_or(|(fewest, _)| fewest < min) {
        shortest += 1;
    }
    let mut longest = max * 4 / 3 + 8;
    while bytes(longest).is_none_or(|(_, most)| most > max) {
        longest -= 1;
    }
    (shortest, longest)
}

/// The `extra` object: parameter names of 1-64 letters, digits, `_` or `-` that are not the
/// engine's own (any case), values text, numbers or booleans.
fn extra_schema(spec: TaskType) -> Value {
    let extra = spec.extra();
    let mut taken: Vec<String> = extra.engine_params.iter().map(|p| p.to_string()).collect();
    taken.push(extra.file_param.to_owned());
    for field in spec.fields() {
        taken.push(field.name().to_owned());
        if let Some(param) = field.param() {
            taken.push(param.to_owned());
            if let FieldKind::Images { count, .. } = field.kind() {
                taken.extend((1..=count).map(|i| format!("{param}_{i}")));
            }
        }
    }
    taken.extend(spec.fixed_params().iter().map(|(name, _)| name.to_string()));
    taken.sort();
    taken.dedup();
    let taken: Vec<String> = taken.iter().map(|t| any_case(t)).collect();
    let allowed = format!("[^{}]", class_body(CONTROL));
    json!({
        "type": "object",
        "description": "Pass-through `in.php` parameters (JSON Schema): names the engine does not set itself, \
            values text without control characters, numbers or booleans (sent as 1/0); null is the same as none.",
        "propertyNames": {
            "pattern": format!("^[A-Za-z0-9_-]{{1,{}}}$", extra.max_name_bytes),
            "not": { "pattern": format!("^(?:{})$", taken.join("|")) },
        },
        "additionalProperties": {
            "anyOf": [
                // Characters are up to 4 bytes of UTF-8.
                { "type": "string", "maxLength": extra.max_value_bytes / 4, "pattern": format!("^{allowed}*$") },
                { "type": "number" },
                { "type": "boolean" },
            ],
        },
    })
}

/// `text` in any ASCII case: `[Tt][Ee][Xx][Tt]`; other characters escaped as needed.
fn any_case(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
            } else if c.is_ascii_alphanumeric() || c == '_' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

/// The inside of a character class holding these ranges (`\uXXXX` escapes).
fn class_body(ranges: &[(u32, u32)]) -> String {
    ranges
        .iter()
        .map(|&(lo, hi)| if lo == hi { format!("\\u{lo:04x}") } else { format!("\\u{lo:04x}-\\u{hi:04x}") })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_ranges(ranges: &[(u32, u32)], c: char) -> bool {
        ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&u32::from(c)))
    }

    #[test]
    fn character_tables_match_std() {
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            assert_eq!(in_ranges(CONTROL, c), c.is_control(), "{c:?}");
            assert_eq!(in_ranges(WHITESPACE, c), c.is_whitespace(), "{c:?}");
        }
    }

    #[test]
    fn base64_lengths_are_tight() {
        use base64::Engine as _;
        let (lo, hi) = base64_lengths(100, 1 << 20);
        assert_eq!((lo, hi), (134, 1_398_102));
        let encode = |n: usize| base64::engine::general_purpose::STANDARD_NO_PAD.encode(vec![0u8; n]);
        assert_eq!(encode(100).len(), lo);
        assert_eq!(encode(99).len() + 1, lo - 1, "99 bytes is 132 characters");
        assert_eq!(encode(1 << 20).len(), hi);
    }

    #[test]
    fn prefixes_spell_the_signatures() {
        use base64::Engine as _;
        let jpeg = base64_prefix(&[Byte::Is(0xFF), Byte::Is(0xD8), Byte::Is(0xFF)]);
        assert_eq!(jpeg, ("[/_]9j[/_]".to_owned(), 1));
        let png: Vec<Byte> = b"\x89PNG\r\n\x1a\n".iter().map(|b| Byte::Is(*b)).collect();
        let text = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\n\0");
        let (prefix, groups) = base64_prefix(&png);
        assert!(prefix.starts_with(&text[..10]) && groups == 3, "{prefix}");
        let gif: Vec<Byte> = b"GIF89a".iter().map(|b| Byte::Is(*b)).collect();
        assert_eq!(base64_prefix(&gif), ("R0lGODlh".to_owned(), 2));
    }

    #[test]
    fn every_type_has_a_schema() {
        let schemas = task_schemas();
        let one_of = schemas["Task"]["oneOf"].as_array().unwrap();
        assert_eq!(one_of.len(), task_types().len());
        for spec in task_types() {
            let schema = &schemas[component_name(spec)];
            let required: Vec<&str> =
                schema["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            for field in spec.fields() {
                assert_eq!(required.contains(&field.name()), field.required(), "{} {}", spec.name(), field.name());
            }
        }
    }
}
