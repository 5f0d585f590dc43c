//! Checks API responses against edge/openapi.json: the status must be documented for the
//! operation, and the JSON body must match the schema (type, nullable, enum, required,
//! properties, items, pattern, minimum/maximum, `$ref` within the document).

use serde_json::Value;

pub struct OpenApi {
    spec: Value,
}

impl OpenApi {
    pub fn load() -> OpenApi {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../edge/openapi.json");
        let spec =
            serde_json::from_str(&std::fs::read_to_string(path).expect("edge/openapi.json")).expect("valid JSON");
        OpenApi { spec }
    }

    /// Panics with a description if the response does not conform.
    pub fn check(&self, method: &str, path: &str, status: u16, body: &Value) {
        let Some(template) = self.template(path) else {
            // Routes outside the document can only be 404s with the standard error body.
            assert_eq!(status, 404, "{method} {path} is not in the OpenAPI document but answered {status}");
            let error = serde_json::json!({"$ref": "#/components/schemas/Error"});
            if let Err(e) = self.validate(&error, body, "$") {
                panic!("{method} {path} {status}: {e}\nbody: {body}");
            }
            return;
        };
        let operation = &self.spec["paths"][template.as_str()][method.to_ascii_lowercase()];
        if !operation.is_object() {
            // Other methods on a documented path can only be 405s with the standard error body.
            assert_eq!(status, 405, "{method} {template} is not documented but answered {status}");
            let error = serde_json::json!({"$ref": "#/components/schemas/Error"});
            if let Err(e) = self.validate(&error, body, "$") {
                panic!("{method} {path} {status}: {e}\nbody: {body}");
            }
            return;
        }
        let response = &operation["responses"][status.to_string()];
        assert!(response.is_object(), "{method} {template} does not document status {status} (body {body})");
        if let Some(schema) = response.pointer("/content/application~1json/schema")
            && let Err(e) = self.validate(schema, body, "$")
        {
            panic!("{method} {path} {status}: {e}\nbody: {body}");
        }
    }

    fn template(&self, path: &str) -> Option<String> {
        let paths = self.spec["paths"].as_object()?;
        paths.keys().find(|t| matches(t, path)).cloned()
    }

    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => self.spec.pointer(r.trim_start_matches('#')).expect("a $ref inside the document"),
            None => schema,
        }
    }

    fn validate(&self, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
        let schema = self.resolve(schema);
        if value.is_null() {
            return if schema.get("nullable") == Some(&Value::Bool(true)) || schema.get("type").is_none() {
                Ok(())
            } else {
                Err(format!("{at} is null but not nullable"))
            };
        }
        if let Some(kind) = schema.get("type").and_then(Value::as_str) {
            let ok = match kind {
                "object" => value.is_object(),
                "array" => value.is_array(),
                "string" => value.is_string(),
                "integer" => value.is_i64() || value.is_u64(),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                _ => true,
            };
            if !ok {
                return Err(format!("{at} should be {kind}, is {value}"));
            }
        }
        if let Some(options) = schema.get("enum").and_then(Value::as_array)
            && !options.contains(value)
        {
            return Err(format!("{at} = {value} is not one of {options:?}"));
        }
        if let (Some(pattern), Some(text)) = (schema.get("pattern").and_then(Value::as_str), value.as_str())
            && !hex_pattern(pattern, text)
        {
            return Err(format!("{at} = {text:?} does not match {pattern}"));
        }
        if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_i64), value.as_i64())
            && n < min
        {
            return Err(format!("{at} = {n} is under {min}"));
        }
        if let (Some(max), Some(n)) = (schema.get("maximum").and_then(Value::as_i64), value.as_i64())
            && n > max
        {
            return Err(format!("{at} = {n} is over {max}"));
        }
        for required in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            let name = required.as_str().unwrap_or_default();
            if value.get(name).is_none() {
                return Err(format!("{at}.{name} is required"));
            }
        }
        if let (Some(properties), Some(object)) =
            (schema.get("properties").and_then(Value::as_object), value.as_object())
        {
            for (name, property) in properties {
                if let Some(v) = object.get(name) {
                    self.validate(property, v, &format!("{at}.{name}"))?;
                }
            }
            if schema.get("additionalProperties") != Some(&Value::Bool(true))
                && let Some(extra) = object.keys().find(|k| !properties.contains_key(*k))
            {
                return Err(format!("{at}.{extra} is not in the schema"));
            }
        }
        if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
            for (i, item) in array.iter().enumerate() {
                self.validate(items, item, &format!("{at}[{i}]"))?;
            }
        }
        Ok(())
    }
}

/// Whether an OpenAPI path template (`/v1/solve/{id}`) matches a concrete path.
fn matches(template: &str, path: &str) -> bool {
    let (t, p): (Vec<_>, Vec<_>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len() && t.iter().zip(&p).all(|(t, p)| (t.starts_with('{') && !p.is_empty()) || t == p)
}

/// The only patterns the document uses: `^[0-9a-f]{N}$`.
fn hex_pattern(pattern: &str, text: &str) -> bool {
    let Some(n) =
        pattern.strip_prefix("^[0-9a-f]{").and_then(|r| r.strip_suffix("}$")).and_then(|n| n.parse::<usize>().ok())
    else {
        panic!("unsupported pattern {pattern}");
    };
    text.len() == n && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
