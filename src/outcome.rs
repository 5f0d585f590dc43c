//! What a solve ends with: a [`Solution`] or a [`Failure`], and their JSON forms.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::codes::{self, Class, Origin};

/// A solve that ended without an answer. Messages never contain the API key.
///
/// As JSON: `{"code", "class", "message", "retry_after_ms", "field", "task_id"}` (absent values
/// are null).
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[error("{code} ({class}): {message}", class = class.as_str())]
#[non_exhaustive]
pub struct Failure {
    /// The raw API code (`ERROR_ZERO_BALANCE`, `IP_BANNED`...) or an engine code
    /// (`INVALID_TASK`, `DEADLINE_EXCEEDED`...); listed by [`crate::codes()`].
    pub code: String,
    /// What the failure means for the caller.
    pub class: Class,
    /// A human explanation.
    pub message: String,
    /// When trying again may help, after how long.
    pub retry_after_ms: Option<u64>,
    /// The task field at fault, for validation failures.
    pub field: Option<String>,
    /// The CaptchaAI task id, once one was assigned (shared with the solve).
    pub task_id: Option<Arc<str>>,
}

impl Failure {
    /// A failure with `code`, `class` and `message`, and no retry time, field or task id (a host
    /// rendering a failure of its own, for example).
    pub fn new(code: impl Into<String>, class: Class, message: impl Into<String>) -> Failure {
        Failure { code: code.into(), class, message: message.into(), retry_after_ms: None, field: None, task_id: None }
    }

    /// Where the failure comes from (from the code table).
    pub fn origin(&self) -> Origin {
        codes::origin(&self.code)
    }
}

/// A solved captcha.
///
/// As JSON: `{"answer": {"text"|"json": ..}, "user_agent", "task_id", "submitted_at",
/// "solved_at", "elapsed_ms", "polls", "attempts", "expires_at"}` (absent values are null).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Solution {
    /// The answer: a token or text, or structured JSON.
    pub answer: Answer,
    /// The solver's user agent, where the type returns one; reuse it on the target site.
    pub user_agent: Option<String>,
    /// The task id of the attempt that succeeded (`None` for synchronous `solve.php` answers;
    /// shared with the solve).
    pub task_id: Option<Arc<str>>,
    /// When the original submit was sent (epoch ms).
    pub submitted_at: u64,
    /// When the answer arrived (epoch ms); token lifetimes count from here, except for an
    /// answer the last poll fetched after the deadline (see `expires_at`).
    pub solved_at: u64,
    /// `solved_at - submitted_at`.
    pub elapsed_ms: u64,
    /// `res.php` polls sent, over all attempts.
    pub polls: u32,
    /// Tasks submitted for this solve: 1 plus fresh resubmissions after ERROR_CAPTCHA_UNSOLVABLE.
    pub attempts: u32,
    /// When the token stops being usable, where the type's lifetime is known: `solved_at` plus
    /// the lifetime; for an answer the last poll fetched after the deadline (it may have waited
    /// at CaptchaAI since the submit), `submitted_at` plus the lifetime.
    pub expires_at: Option<u64>,
}

impl Solution {
    /// How old the answer is at `now`.
    pub fn age_ms(&self, now: u64) -> u64 {
        now.saturating_sub(self.solved_at)
    }

    /// Whether the answer may still be used at `now`: no older than `max_age_ms` (seed 000's
    /// `max_token_age`) and not past `expires_at`.
    pub fn is_fresh(&self, now: u64, max_age_ms: u64) -> bool {
        self.age_ms(now) <= max_age_ms && self.expires_at.is_none_or(|expires| now < expires)
    }

    /// The solution as the JSON object a client gets (the WIT's `solution-json`): the
    /// [`Serialize`] form, but `answer` is the text itself, or the structured answer's JSON value.
    pub fn client_json(&self) -> String {
        let answer = match &self.answer {
            Answer::Text(text) => ClientAnswer::Text(text),
            Answer::Json(text) => serde_json::from_str(text).map_or(ClientAnswer::Text(text), ClientAnswer::Json),
        };
        let client = ClientSolution {
            answer,
            user_agent: &self.user_agent,
            task_id: &self.task_id,
            submitted_at: self.submitted_at,
            solved_at: self.solved_at,
            elapsed_ms: self.elapsed_ms,
            polls: self.polls,
            attempts: self.attempts,
            expires_at: self.expires_at,
        };
        serde_json::to_string(&client).unwrap_or_default()
    }
}

/// [`Solution::client_json`]'s shape.
#[derive(Serialize)]
struct ClientSolution<'a> {
    answer: ClientAnswer<'a>,
    user_agent: &'a Option<String>,
    task_id: &'a Option<Arc<str>>,
    submitted_at: u64,
    solved_at: u64,
    elapsed_ms: u64,
    polls: u32,
    attempts: u32,
    expires_at: Option<u64>,
}

/// The answer as a client gets it: the text, or the structured answer's JSON value.
#[derive(Serialize)]
#[serde(untagged)]
enum ClientAnswer<'a> {
    Text(&'a str),
    Json(serde_json::Value),
}

/// A solved value: an opaque token or text, or a structured answer as compact JSON
/// (grid and BLS cell lists, GeeTest and Lemin objects).
///
/// As JSON: `{"text": "..."}` or `{"json": "..."}` (the structured answer as a string). The text
/// is shared: the sticky terminal output hands out the same answer without copying it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Answer {
    /// A token or text, as the service sent it.
    Text(Arc<str>),
    /// A structured answer, as compact JSON text.
    Json(Arc<str>),
}

impl Answer {
    /// The answer as text (the token, or the JSON text of a structured answer).
    pub fn as_str(&self) -> &str {
        match self {
            Answer::Text(s) | Answer::Json(s) => s,
        }
    }

    /// The structured answer, parsed.
    pub fn as_json(&self) -> Option<serde_json::Value> {
        match self {
            Answer::Json(s) => serde_json::from_str(s).ok(),
            Answer::Text(_) => None,
        }
    }
}
