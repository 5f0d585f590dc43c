//! Tasks: parsing task JSON against the registry, validating every field before anything is
//! sent, and producing the `in.php` parameters.
//!
//! Task JSON is an object with `type` (a registry name), the type's fields by their task names,
//! and an optional `extra` object of pass-through parameters:
//! `{"type": "recaptcha_v2", "sitekey": "6Le...", "pageurl": "https://example.com/login"}`.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::codes::{self, Problem};
use crate::error::{ValidationError, field_must as must, invalid_task as invalid};
use crate::image::{self, Image};
use crate::registry::{self, EXTRA, FieldKind, FieldSpec, ImageLimits, TaskType, TypeSpec};
use crate::reply::Field;

/// How the submit goes over the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Upload {
    /// `application/x-www-form-urlencoded` (images as base64 in a field).
    Form,
    /// `multipart/form-data` with the image as a `file` part (`method=post`).
    Multipart,
}

/// A validated task. Construct it with [`Task::from_json`], [`Task::from_value`] or serde
/// ([`Deserialize`]); [`Serialize`] writes the canonical task JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    spec: &'static TypeSpec,
    /// Shared and never changed after validation: cloning a task (say, for another solve of it)
    /// counts a reference instead of copying every string (~750 of a native canned solve's 10.2k
    /// instructions for a reCAPTCHA task, clone and drop, callgrind).
    fields: Arc<Fields>,
}

/// A task's values in table order, and its `extra` parameters in the order given.
#[derive(Clone, Debug, PartialEq)]
struct Fields {
    values: Vec<(&'static FieldSpec, FieldValue)>,
    extra: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq)]
enum FieldValue {
    Text(String),
    Flag(bool),
    Int(i64),
    Image(Image),
    Images(Vec<Image>),
}

impl Task {
    /// Parses and validates task JSON. Errors name the offending field.
    pub fn from_json(json: &str) -> Result<Task, ValidationError> {
        let object = serde_json::from_str::<TaskObject<'_>>(json).map_err(|e| {
            let message = if e.is_data() {
                "task must be a JSON object".to_owned()
            } else {
                format!("task is not valid JSON: {e}")
            };
            ValidationError::new(codes::INVALID_TASK, None, message)
        })?;
        Task::from_object(&object)
    }

    /// Validates an already parsed task object.
    pub fn from_value(value: &Value) -> Result<Task, ValidationError> {
        let object = TaskObject::deserialize(value)
            .map_err(|_| ValidationError::new(codes::INVALID_TASK, None, "task must be a JSON object"))?;
        Task::from_object(&object)
    }

    fn from_object(object: &TaskObject<'_>) -> Result<Task, ValidationError> {
        let spec = type_of(object)?;
        // One pass puts each value in its table row's slot; an unknown or repeated key is
        // refused where it first stands (document order). Null counts as not given.
        let mut given: Vec<Option<&Field<'_>>> = vec![None; spec.fields.len()];
        let (mut type_, mut extra) = (None, None);
        for (name, value) in &object.0 {
            let slot = match spec.fields.iter().position(|f| f.name == name) {
                Some(row) => &mut given[row],
                None if name == "type" => &mut type_,
                None if name == "extra" => &mut extra,
                None => return Err(unknown_field(spec, name)),
            };
            if slot.replace(value).is_some() {
                return Err(invalid(clip(name), format!("`{}` is given twice", clip(name))));
            }
        }
        let not_null = |value: &&Field<'_>| !matches!(value, Field::Null);
        let mut values = Vec::with_capacity(spec.fields.len());
        for (field, value) in spec.fields.iter().zip(given) {
            let default = field.default.map(|d| Field::Str(Cow::Borrowed(d)));
            match value.filter(not_null).or(default.as_ref()) {
                Some(v) => values.push((field, parse_field(field, v)?)),
                None if field.required => {
                    let error = invalid(field.name, format!("`{}` is required for type {}", field.name, spec.name));
                    return Err(error.because(Problem::Missing));
                }
                None => {}
            }
        }
        let task = Task { spec, fields: Arc::new(Fields { values, extra: Vec::new() }) };
        task.check_combinations()?;
        let Some(extra) = extra.filter(not_null) else { return Ok(task) };
        let extra = task.parse_extra(extra)?;
        // The only reference: unwrapped without a copy.
        let Fields { values, .. } = Arc::unwrap_or_clone(task.fields);
        Ok(Task { spec, fields: Arc::new(Fields { values, extra }) })
    }

    /// The task's type, as the registry lists it.
    pub fn task_type(&self) -> TaskType {
        TaskType::new(self.spec)
    }

    /// The registry row of this task's type.
    pub(crate) fn spec(&self) -> &'static TypeSpec {
        self.spec
    }

    /// Whether the image goes up as a multipart file or a form field.
    pub fn upload(&self) -> Upload {
        match self.text("upload") {
            Some("multipart") => Upload::Multipart,
            _ => Upload::Form,
        }
    }

    /// Whether the task opted into synchronous solving through `solve.php`.
    pub fn is_sync(&self) -> bool {
        self.flag("sync")
    }

    /// The `method` sent to `in.php` (a multipart upload uses `post`).
    pub fn method(&self) -> &'static str {
        match self.upload() {
            Upload::Multipart => registry::MULTIPART_METHOD,
            Upload::Form => self.spec.method,
        }
    }

    /// The image of an image task, if any.
    pub fn image(&self) -> Option<&Image> {
        self.fields.values.iter().find_map(|(_, v)| match v {
            FieldValue::Image(image) => Some(image),
            _ => None,
        })
    }

    /// The submit parameters in wire order, without `key`, `json` and (for multipart) the file:
    /// `method`, the fields in table order, the type's fixed parameters, then `extra` by name.
    pub fn params(&self) -> Vec<(String, String)> {
        let mut params = Vec::new();
        self.each_param(|name, value| params.push((name.to_owned(), value.to_owned())));
        params
    }

    /// Calls `f` with each submit parameter, in the order of [`Task::params`].
    pub fn each_param(&self, mut f: impl FnMut(&str, &str)) {
        f("method", self.method());
        let multipart = self.upload() == Upload::Multipart;
        for (field, value) in &self.fields.values {
            match value {
                _ if field.param.is_empty() => {}
                FieldValue::Text(text) => f(field.param, text),
                FieldValue::Flag(true) => f(field.param, "1"),
                FieldValue::Flag(false) => {}
                FieldValue::Int(n) => f(field.param, &n.to_string()),
                FieldValue::Image(_) if multipart => {}
                FieldValue::Image(image) => f(field.param, &image.base64),
                FieldValue::Images(images) => {
                    for (i, image) in images.iter().enumerate() {
                        let uri = format!("data:{};base64,{}", image.format.mime(), image.base64);
                        f(&format!("{}_{}", field.param, i + 1), &uri);
                    }
                }
            }
        }
        for (name, value) in self.spec.fixed {
            f(name, value);
        }
        for (name, value) in &self.fields.extra {
            f(name, value);
        }
    }

    fn get(&self, name: &str) -> Option<&FieldValue> {
        self.fields.values.iter().find(|(f, _)| f.name == name).map(|(_, v)| v)
    }

    fn text(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(FieldValue::Text(text)) => Some(text),
            _ => None,
        }
    }

    fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some(FieldValue::Flag(true)))
    }

    fn int(&self, name: &str) -> Option<i64> {
        match self.get(name) {
            Some(FieldValue::Int(n)) => Some(*n),
            _ => None,
        }
    }

    fn check_combinations(&self) -> Result<(), ValidationError> {
        let has_proxy = self.get("proxy").is_some();
        let has_type = self.get("proxytype").is_some();
        if has_proxy && !has_type {
            let error = invalid("proxytype", "`proxytype` (HTTP, HTTPS, SOCKS4 or SOCKS5) is required with `proxy`");
            return Err(error.because(Problem::Missing));
        }
        if has_type && !has_proxy {
            return Err(invalid("proxytype", "`proxytype` was given without `proxy`"));
        }
        if let (Some(min), Some(max)) = (self.int("min_len"), self.int("max_len"))
            && max > 0
            && min > max
        {
            return Err(invalid("min_len", format!("`min_len` ({min}) is greater than `max_len` ({max})")));
        }
        Ok(())
    }

    fn parse_extra(&self, extra: &Field<'_>) -> Result<Vec<(String, String)>, ValidationError> {
        let Field::Json(Value::Object(object)) = extra else {
            return Err(invalid("extra", "`extra` must be an object of parameter names to values"));
        };
        let generated = self.params();
        let mut out = Vec::with_capacity(object.len());
        for (name, value) in object {
            let field = format!("extra.{}", crate::text::clip(name, 100));
            // A PHP backend reads `key[]` and `key[0]` as `key`; compare the part before `[`,
            // in any case.
            let base = name.split('[').next().unwrap_or_default();
            let is = |param: &str| param.eq_ignore_ascii_case(base);
            if EXTRA.engine_params.iter().any(|p| is(p)) {
                return Err(invalid(
                    &field,
                    format!("`{field}`: `{base}` is set by the engine and cannot be overridden"),
                ));
            }
            // Names go into the form unescaped (`FormWriter::push`): only these characters.
            if name.is_empty() || name.len() > EXTRA.max_name_bytes || !crate::http::is_plain_name(name) {
                return Err(invalid(
                    &field,
                    format!("`{field}`: parameter names must be 1-64 ASCII letters, digits, `_` or `-`"),
                ));
            }
            let typed = self
                .spec
                .fields
                .iter()
                .any(|f| is(f.name) || (!f.param.is_empty() && is(f.param)) || f.aliases.iter().any(|a| is(a)));
            if typed || generated.iter().any(|(p, _)| is(p)) || is(EXTRA.file_param) {
                return Err(invalid(
                    &field,
                    format!("`{field}`: `{name}` is a field of type {}; set it directly", self.spec.name),
                ));
            }
            // `version=v3` on a recaptcha_v2 task would make it a v3 task at CaptchaAI.
            let sibling =
                registry::TYPES.iter().find(|t| t.method == self.spec.method && t.fixed.iter().any(|(p, _)| is(p)));
            if let Some(sibling) = sibling {
                return Err(invalid(
                    &field,
                    format!("`{field}`: `{base}` tells type {} apart; use that type", sibling.name),
                ));
            }
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => u8::from(*b).to_string(),
                _ => return Err(invalid(&field, format!("`{field}` must be a string, number or boolean"))),
            };
            if text.len() > EXTRA.max_value_bytes || text.chars().any(char::is_control) {
                return Err(invalid(&field, format!("`{field}` must be text up to 64 KiB without control characters")));
            }
            out.push((name.clone(), text));
        }
        Ok(out)
    }
}

/// The canonical task JSON: `type`, the fields in table order with normalised values and
/// defaults filled in, then `extra` (when not empty). Parsing it gives back an equal task.
impl Serialize for Task {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer
            .serialize_map(Some(self.fields.values.len() + 1 + usize::from(!self.fields.extra.is_empty())))?;
        map.serialize_entry("type", self.spec.name)?;
        for (field, value) in &self.fields.values {
            match value {
                FieldValue::Text(text) => map.serialize_entry(field.name, text)?,
                FieldValue::Flag(flag) => map.serialize_entry(field.name, flag)?,
                FieldValue::Int(n) => map.serialize_entry(field.name, n)?,
                FieldValue::Image(image) => map.serialize_entry(field.name, &image.base64)?,
                FieldValue::Images(images) => {
                    let list: Vec<&str> = images.iter().map(|i| i.base64.as_str()).collect();
                    map.serialize_entry(field.name, &list)?
                }
            }
        }
        if !self.fields.extra.is_empty() {
            map.serialize_entry("extra", &ExtraMap(&self.fields.extra))?;
        }
        map.end()
    }
}

/// `extra` as a JSON object in its stored order.
struct ExtraMap<'a>(&'a [(String, String)]);

impl Serialize for ExtraMap<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

/// Validates as [`Task::from_value`] does; the error message names the field.
impl<'de> Deserialize<'de> for Task {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Task, D::Error> {
        let object = TaskObject::deserialize(deserializer)?;
        Task::from_object(&object).map_err(serde::de::Error::custom)
    }
}

/// The top level of task JSON: its fields in document order, strings borrowed from the text
/// where they can be (nested values, such as `extra` and `images`, are serde_json values).
struct TaskObject<'a>(Vec<(Cow<'a, str>, Field<'a>)>);

impl TaskObject<'_> {
    /// The field with this name, unless it is null.
    fn get(&self, name: &str) -> Option<&Field<'_>> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v).filter(|v| !matches!(v, Field::Null))
    }
}

impl<'de> Deserialize<'de> for TaskObject<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = TaskObject<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a task object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TaskObject<'de>, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(6));
                while let Some(key) = map.next_key::<Field<'de>>()? {
                    let Field::Str(key) = key else { return Err(serde::de::Error::custom("keys are strings")) };
                    fields.push((key, map.next_value::<Field<'de>>()?));
                }
                Ok(TaskObject(fields))
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}

fn type_of(object: &TaskObject<'_>) -> Result<&'static TypeSpec, ValidationError> {
    let name = match object.get("type") {
        Some(Field::Str(name)) => name,
        Some(_) => return Err(invalid("type", "`type` must be a string")),
        None => return Err(invalid("type", "`type` is required").because(Problem::Missing)),
    };
    if let Some(spec) = registry::lookup(name) {
        return Ok(spec);
    }
    if let Some((_, reason)) = registry::UNSUPPORTED.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
        return Err(invalid("type", *reason));
    }
    let known = crate::text::list(registry::TYPES.iter().map(|t| t.name));
    Err(invalid("type", format!("unknown type `{}`; supported: {known}", clip(name))))
}

fn unknown_field(spec: &TypeSpec, name: &str) -> ValidationError {
    let hint = spec
        .fields
        .iter()
        .find(|f| f.param == name && f.name != name)
        .map(|f| format!(" (did you mean `{}`?)", f.name))
        .unwrap_or_default();
    invalid(
        clip(name),
        format!("unknown field `{}` for type {}{hint}; pass-through parameters go in `extra`", clip(name), spec.name),
    )
}

/// Shortens untrusted text quoted back in messages.
fn clip(text: &str) -> String {
    crate::text::clip(text, 64)
}

fn parse_field(field: &'static FieldSpec, value: &Field<'_>) -> Result<FieldValue, ValidationError> {
    let name = field.name;
    Ok(match field.kind {
        FieldKind::Text { max_chars } => FieldValue::Text(text(name, value, max_chars)?),
        FieldKind::Url { max_chars } => FieldValue::Text(url(name, value, max_chars)?),
        FieldKind::Flag | FieldKind::Sync => FieldValue::Flag(flag(name, value)?),
        FieldKind::Score { min_tenths, max_tenths } => FieldValue::Text(score(name, value, min_tenths, max_tenths)?),
        FieldKind::Choice { values } | FieldKind::Upload { modes: values } => {
            FieldValue::Text(choice(name, value, values)?.to_owned())
        }
        FieldKind::Int { min, max } => FieldValue::Int(int(name, value, min, max)?),
        FieldKind::Proxy { max_chars } => FieldValue::Text(proxy(name, value, max_chars)?),
        FieldKind::Image(limits) => FieldValue::Image(image::decode(name, value.as_str(), limits)?),
        FieldKind::Images { count, each } => FieldValue::Images(image_set(name, value, count, each)?),
    })
}

fn text(name: &str, value: &Field<'_>, max: usize) -> Result<String, ValidationError> {
    let text = match value {
        Field::Str(s) => Cow::Borrowed(&**s),
        Field::Json(Value::Number(n)) => Cow::Owned(n.to_string()),
        _ => return Err(must(name, "must be a string")),
    };
    if text.trim().is_empty() {
        return Err(must(name, "must not be empty"));
    }
    // Characters are counted only when the bytes could exceed `max`; control characters
    // (C0, DEL, C1 = 0xC2 0x80..0x9F) are looked for only when a byte could start one.
    if text.len() > max && text.chars().count() > max {
        return Err(invalid(name, format!("`{name}` is longer than {max} characters")));
    }
    let suspect = crate::text::any_byte(&text, |b| (b < 0x20) | (b == 0x7f) | (b == 0xc2));
    if suspect && text.chars().any(char::is_control) {
        return Err(must(name, "must not contain control characters"));
    }
    Ok(text.into_owned())
}

fn url(name: &str, value: &Field<'_>, max_chars: usize) -> Result<String, ValidationError> {
    let text = text(name, value, max_chars)?;
    let after =
        |scheme: &str| text.get(..scheme.len()).filter(|s| s.eq_ignore_ascii_case(scheme)).map(|s| &text[s.len()..]);
    let rest = after("https://")
        .or_else(|| after("http://"))
        .ok_or_else(|| must(name, "must be an absolute http:// or https:// URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') || text.chars().any(char::is_whitespace) {
        return Err(must(name, "must be an absolute URL with a host and no spaces"));
    }
    Ok(text)
}

fn flag(name: &str, value: &Field<'_>) -> Result<bool, ValidationError> {
    match value {
        Field::Bool(b) => Ok(*b),
        Field::Json(Value::Number(n)) if n.as_u64() == Some(0) => Ok(false),
        Field::Json(Value::Number(n)) if n.as_u64() == Some(1) => Ok(true),
        Field::Str(s) if s == "0" || s.eq_ignore_ascii_case("false") => Ok(false),
        Field::Str(s) if s == "1" || s.eq_ignore_ascii_case("true") => Ok(true),
        _ => Err(must(name, "must be true or false")),
    }
}

fn number(name: &str, value: &Field<'_>) -> Result<f64, ValidationError> {
    let n = match value {
        Field::Json(Value::Number(n)) => n.as_f64(),
        Field::Str(s) => crate::text::number(s),
        _ => None,
    };
    n.filter(|n| n.is_finite()).ok_or_else(|| must(name, "must be a number"))
}

fn score(name: &str, value: &Field<'_>, lo: u8, hi: u8) -> Result<String, ValidationError> {
    let n = number(name, value)?;
    if !(f64::from(lo) / 10.0..=f64::from(hi) / 10.0).contains(&n) {
        return Err(must(name, &format!("must be between 0.{lo} and 0.{hi}")));
    }
    // Hundredths, written without float formatting: 0.3 -> "0.3", 0.25 -> "0.25".
    let hundredths = (n * 100.0).round() as u32;
    let (tenths, rest) = (hundredths / 10, hundredths % 10);
    Ok(if rest == 0 { format!("0.{tenths}") } else { format!("0.{tenths}{rest}") })
}

fn int(name: &str, value: &Field<'_>, min: i64, max: i64) -> Result<i64, ValidationError> {
    let n = match value {
        Field::Json(Value::Number(n)) => n.as_i64(),
        Field::Str(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    match n {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(invalid(name, format!("`{name}` must be a whole number from {min} to {max}"))),
    }
}

fn choice(name: &str, value: &Field<'_>, options: &'static [&'static str]) -> Result<&'static str, ValidationError> {
    let found = value.as_str().and_then(|s| options.iter().find(|o| o.eq_ignore_ascii_case(s.trim())));
    found
        .copied()
        .ok_or_else(|| invalid(name, format!("`{name}` must be one of {}", crate::text::list(options.iter().copied()))))
}

/// Checks `host:port` or `user:pass@host:port` (the solver's proxy; the scheme goes in
/// `proxytype`).
fn proxy(name: &str, value: &Field<'_>, max_chars: usize) -> Result<String, ValidationError> {
    let text = text(name, value, max_chars)?;
    let bad = |why: &str| invalid(name, format!("`{name}` must look like host:port or user:pass@host:port ({why})"));
    if crate::text::find(&text, "://").is_some() {
        return Err(bad("no scheme: put HTTP, HTTPS, SOCKS4 or SOCKS5 in `proxytype`"));
    }
    if text.chars().any(char::is_whitespace) {
        return Err(bad("no spaces"));
    }
    let host_port = match text.rsplit_once('@') {
        Some((credentials, host_port)) => {
            let (user, _password) = credentials.split_once(':').ok_or_else(|| bad("credentials need user:pass"))?;
            if user.is_empty() {
                return Err(bad("empty user name"));
            }
            host_port
        }
        None => &text,
    };
    let (host, port) = host_port.rsplit_once(':').ok_or_else(|| bad("missing port"))?;
    match port.parse::<u16>() {
        Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => {}
        _ => return Err(bad("port must be 1-65535")),
    }
    let host_ok = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
    } else {
        !host.is_empty()
            && host.len() <= 253
            && host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
    };
    if !host_ok {
        return Err(bad("invalid host"));
    }
    Ok(text)
}

fn image_set(name: &str, value: &Field<'_>, count: usize, each: ImageLimits) -> Result<Vec<Image>, ValidationError> {
    let Field::Json(Value::Array(items)) = value else {
        return Err(invalid(name, format!("`{name}` must be an array of {count} base64 images")));
    };
    if items.len() != count {
        return Err(invalid(name, format!("`{name}` must hold exactly {count} images (got {})", items.len())));
    }
    items.iter().enumerate().map(|(i, item)| image::decode(&format!("{name}[{i}]"), item.as_str(), each)).collect()
}
