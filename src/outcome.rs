//! What a solve ends with: a [`Solution`] or a [`Failure`].

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::codes::Class;

/// A solve that ended without an answer. Messages never contain the API key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Error)]
#[error("{code} ({class}): {message}", class = class.as_str())]
pub struct Failure {
    /// The raw API code (`ERROR_ZERO_BALANCE`, `IP_BANNED`...) or an engine code
    /// (`INVALID_TASK`, `DEADLINE_EXCEEDED`...); see [`crate::codes::TABLE`].
    pub code: String,
    pub class: Class,
    /// A human explanation.
    pub message: String,
    /// When trying again may help, after how long.
    pub retry_after_ms: Option<u64>,
    /// The task field at fault, for validation failures.
    pub field: Option<String>,
    /// The CaptchaAI task id, once one was assigned.
    pub task_id: Option<String>,
}

/// A solved captcha.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Solution {
    pub answer: Answer,
    /// The solver's user agent, where the type returns one; reuse it on the target site.
    pub user_agent: Option<String>,
    /// The task id of the attempt that succeeded (`None` for synchronous `solve.php` answers).
    pub task_id: Option<String>,
    /// When the original submit was sent (epoch ms).
    pub submitted_at: u64,
    /// When the answer arrived (epoch ms); token lifetimes count from here.
    pub solved_at: u64,
    /// `solved_at - submitted_at`.
    pub elapsed_ms: u64,
    /// `res.php` polls sent, over all attempts.
    pub polls: u32,
    /// Tasks submitted for this solve: 1 plus fresh resubmissions after ERROR_CAPTCHA_UNSOLVABLE.
    pub attempts: u32,
    /// When the token stops being usable, where the type's lifetime is known.
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
}

/// A solved value: an opaque token or text, or a structured answer as compact JSON
/// (grid and BLS cell lists, GeeTest and Lemin objects).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Text(String),
    Json(String),
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
