//! Turning a solved reply value into an [`Answer`] of the type's shape.
//!
//! Structured answers are accepted as JSON text (what the service sends), as already-parsed JSON,
//! or in the plain-text forms peers document (`click:1/4/7`, `challenge:..,validate:..`). A
//! structured answer that cannot be read is returned as text rather than dropped.

use serde_json::{Map, Value};

use crate::outcome::Answer;
use crate::registry::AnswerShape;

pub(crate) fn build(shape: AnswerShape, value: &Value) -> Answer {
    let structured = match shape {
        AnswerShape::Text => None,
        AnswerShape::Cells => cells(value).map(Value::from),
        AnswerShape::Object(keys) => object(value).filter(|o| keys.iter().all(|k| o.contains_key(*k))).map(Value::Object),
    };
    match structured {
        Some(json) => Answer::Json(json.to_string()),
        None => Answer::Text(text(value)),
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn cells(value: &Value) -> Option<Vec<u64>> {
    match value {
        Value::Array(items) => items.iter().map(cell).collect::<Option<Vec<_>>>().filter(|c| !c.is_empty()),
        Value::Number(n) => n.as_u64().map(|n| vec![n]),
        Value::String(s) => {
            let s = s.trim();
            if s.starts_with('[') {
                return serde_json::from_str::<Value>(s).ok().as_ref().and_then(cells);
            }
            let list = s.strip_prefix("click:").unwrap_or(s);
            let cells: Option<Vec<u64>> = list
                .split(['/', ',', ';', ' '])
                .filter(|part| !part.is_empty())
                .map(|part| part.trim().parse().ok())
                .collect();
            cells.filter(|c| !c.is_empty())
        }
        _ => None,
    }
}

fn cell(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn object(value: &Value) -> Option<Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map.clone()),
        Value::String(s) if s.trim_start().starts_with('{') => match serde_json::from_str(s.trim()) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        },
        Value::String(s) => {
            let mut map = Map::new();
            for pair in s.split(',') {
                let (k, v) = pair.split_once(':')?;
                map.insert(k.trim().to_owned(), Value::from(v.trim()));
            }
            Some(map).filter(|m| !m.is_empty())
        }
        _ => None,
    }
}
