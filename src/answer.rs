//! Turning a solved reply value into an [`Answer`] of the type's shape.
//!
//! Structured answers are accepted as JSON text (what the service sends), as already-parsed JSON,
//! or in the plain-text forms peers document (`click:1/4/7`, `challenge:..,validate:..`). A
//! structured answer that cannot be read is returned as text rather than dropped.

use std::borrow::Cow;

use crate::json::Json;
use crate::outcome::Answer;
use crate::registry::AnswerShape;

pub(crate) fn build(shape: AnswerShape, value: &Json<'_>) -> Answer {
    let structured = match shape {
        AnswerShape::Text => None,
        AnswerShape::Cells => cells(value).map(|cells| Json::Array(cells.into_iter().map(Json::from).collect())),
        AnswerShape::Object(keys) => {
            object(value).filter(|fields| keys.iter().all(|k| fields.iter().any(|(f, _)| f == k))).map(Json::Object)
        }
    };
    match structured {
        Some(json) => Answer::Json(json.to_text()),
        None => Answer::Text(text(value)),
    }
}

fn text(value: &Json<'_>) -> String {
    match value {
        Json::String(s) => s.to_string(),
        other => other.to_text(),
    }
}

fn cells(value: &Json<'_>) -> Option<Vec<u64>> {
    match value {
        Json::Array(items) => items.iter().map(cell).collect::<Option<Vec<_>>>().filter(|c| !c.is_empty()),
        Json::Number(_) => value.as_u64().map(|n| vec![n]),
        Json::String(s) => {
            let s = s.trim();
            if s.starts_with('[') {
                return Json::parse(s).ok().as_ref().and_then(cells);
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

fn cell(value: &Json<'_>) -> Option<u64> {
    match value {
        Json::String(s) => s.trim().parse().ok(),
        other => other.as_u64(),
    }
}

fn object<'a>(value: &Json<'a>) -> Option<Vec<(Cow<'a, str>, Json<'a>)>> {
    match value {
        Json::Object(fields) => Some(fields.clone()),
        Json::String(s) if s.trim_start().starts_with('{') => match Json::parse(s) {
            Ok(Json::Object(fields)) => {
                Some(fields.into_iter().map(|(k, v)| (Cow::Owned(k.into_owned()), v.into_owned())).collect())
            }
            _ => None,
        },
        Json::String(s) => {
            let mut fields = Vec::new();
            for pair in s.split(',') {
                let (k, v) = pair.split_once(':')?;
                fields.push((Cow::Owned(k.trim().to_owned()), Json::String(Cow::Owned(v.trim().to_owned()))));
            }
            Some(fields).filter(|f| !f.is_empty())
        }
        _ => None,
    }
}
