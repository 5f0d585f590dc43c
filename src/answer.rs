//! Turning a solved reply value into an [`Answer`] of the type's shape.
//!
//! Structured answers are accepted as JSON text (what the service sends), as already-parsed JSON,
//! or in the plain-text forms peers document (`click:1/4/7`, `challenge:..,validate:..`). A
//! structured answer that cannot be read is returned as text rather than dropped.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::json::Json;
use crate::outcome::Answer;
use crate::registry::AnswerShape;
use crate::reply::Field;

/// The answer for a reply value given as a [`Json`] value (what the state machine holds).
pub(crate) fn build(shape: AnswerShape, value: &Json<'_>) -> Answer {
    let field = match value {
        Json::Null => Field::Null,
        Json::Bool(b) => Field::Bool(*b),
        Json::String(s) => Field::Str(Cow::Borrowed(s)),
        other => serde_json::from_str(&other.to_text()).map_or(Field::Null, Field::Json),
    };
    build_field(shape, &field)
}

/// The answer for a reply value.
pub(crate) fn build_field(shape: AnswerShape, value: &Field<'_>) -> Answer {
    let structured = match shape {
        AnswerShape::Text => None,
        AnswerShape::Cells => cells(value).map(|cells| Value::Array(cells.into_iter().map(Value::from).collect())),
        AnswerShape::Object(keys) => {
            object(value).filter(|fields| keys.iter().all(|k| fields.contains_key(*k))).map(Value::Object)
        }
    };
    match structured {
        Some(json) => Answer::Json(json.to_string()),
        None => Answer::Text(text(value)),
    }
}

fn text(value: &Field<'_>) -> String {
    match value {
        Field::Str(s) => s.to_string(),
        Field::Json(json) => json.to_string(),
        Field::Bool(b) => b.to_string(),
        Field::Null => "null".to_owned(),
    }
}

fn cells(value: &Field<'_>) -> Option<Vec<u64>> {
    match value {
        Field::Json(json) => json_cells(json),
        Field::Str(s) => {
            let s = s.trim();
            if s.starts_with('[') {
                return serde_json::from_str::<Value>(s).ok().as_ref().and_then(json_cells);
            }
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

fn object(value: &Field<'_>) -> Option<Map<String, Value>> {
    match value {
        Field::Json(Value::Object(fields)) => Some(fields.clone()),
        Field::Str(s) if s.trim_start().starts_with('{') => match serde_json::from_str(s) {
            Ok(Value::Object(fields)) => Some(fields),
            _ => None,
        },
        Field::Str(s) => {
            let mut fields = Map::new();
            for pair in s.split(',') {
                let (k, v) = pair.split_once(':')?;
                fields.insert(k.trim().to_owned(), Value::String(v.trim().to_owned()));
            }
            Some(fields).filter(|f| !f.is_empty())
        }
        _ => None,
    }
}
