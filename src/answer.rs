//! Turning a solved reply value into an [`Answer`] of the type's shape.
//!
//! Structured answers are accepted as JSON text (what the service sends), as already-parsed JSON,
//! or in the plain-text forms peers document (`click:1/4/7`, `challenge:..,validate:..`). A
//! structured answer that cannot be read is returned as text rather than dropped.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::outcome::Answer;
use crate::registry::AnswerShape;
use crate::reply::Field;

/// The answer for a reply value. For the structured types, any JSON object or array (sent as
/// JSON or as JSON text) is the answer whatever its keys (cell lists are normalised to numbers);
/// otherwise the plain-text forms are read; what cannot be read stays text.
pub(crate) fn build(shape: AnswerShape, value: &Field<'_>) -> Answer {
    if shape == AnswerShape::Text {
        return Answer::Text(text(value));
    }
    if let Some(json) = json_structure(value) {
        let json = match shape {
            AnswerShape::Cells => json_cells(&json).map(cell_list).unwrap_or(json),
            _ => json,
        };
        return Answer::Json(json.to_string().into());
    }
    let structured = match shape {
        AnswerShape::Text => None,
        AnswerShape::Cells => cells(value).map(cell_list),
        AnswerShape::Object(keys) => {
            text_object(value).filter(|fields| keys.iter().all(|k| fields.contains_key(*k))).map(Value::Object)
        }
    };
    match structured {
        Some(json) => Answer::Json(json.to_string().into()),
        None => Answer::Text(text(value)),
    }
}

/// A JSON object or array, given as JSON or as JSON text.
fn json_structure(value: &Field<'_>) -> Option<Value> {
    match value {
        Field::Json(json @ (Value::Array(_) | Value::Object(_))) => Some(json.clone()),
        Field::Str(s) if s.trim_start().starts_with(['{', '[']) => {
            serde_json::from_str::<Value>(s).ok().filter(|v| v.is_array() || v.is_object())
        }
        _ => None,
    }
}

fn cell_list(cells: Vec<u64>) -> Value {
    Value::Array(cells.into_iter().map(Value::from).collect())
}

fn text(value: &Field<'_>) -> Arc<str> {
    match value {
        Field::Str(s) => Arc::from(&**s),
        Field::Json(json) => json.to_string().into(),
        Field::Bool(b) => Arc::from(if *b { "true" } else { "false" }),
        Field::Null => Arc::from("null"),
    }
}

/// A number or the text forms `1,4,7`, `1/4/7`, `click:1/4/7`.
fn cells(value: &Field<'_>) -> Option<Vec<u64>> {
    match value {
        Field::Json(json) => json_cells(json),
        Field::Str(s) => {
            let s = s.trim();
            let list = s.strip_prefix("click:").unwrap_or(s);
            let cells: Option<Vec<u64>> = list
                .split(['/', ',', ';', ' '])
                .filter(|part| !part.is_empty())
                .map(|part| part.parse().ok())
                .collect();
            cells.filter(|c| !c.is_empty())
        }
        _ => None,
    }
}

fn json_cells(value: &Value) -> Option<Vec<u64>> {
    match value {
        Value::Array(items) => items.iter().map(cell).collect::<Option<Vec<_>>>().filter(|c| !c.is_empty()),
        Value::Number(n) => n.as_u64().map(|n| vec![n]),
        _ => None,
    }
}

fn cell(value: &Value) -> Option<u64> {
    match value {
        Value::String(s) => s.trim().parse().ok(),
        other => other.as_u64(),
    }
}

/// The text form `challenge:..,validate:..,seccode:..`.
fn text_object(value: &Field<'_>) -> Option<Map<String, Value>> {
    let Field::Str(s) = value else { return None };
    let mut fields = Map::new();
    for pair in s.split(',') {
        let (k, v) = pair.split_once(':')?;
        fields.insert(k.trim().to_owned(), Value::String(v.trim().to_owned()));
    }
    Some(fields).filter(|f| !f.is_empty())
}
