//! What a solve ends with: a [`Solution`] or a [`Failure`], and their JSON forms.

use thiserror::Error;

use crate::codes::Class;
use crate::json::{Fields, Json, single};

/// A solve that ended without an answer. Messages never contain the API key.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
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

impl Failure {
    /// Where the failure comes from (from the code table).
    pub fn origin(&self) -> crate::codes::Origin {
        crate::codes::origin(&self.code)
    }

    /// `{"code", "class", "message", "retry_after_ms", "field", "task_id"}` (absent values are null).
    pub fn to_json(&self) -> Json<'_> {
        Json::object([
            ("code", Json::from(self.code.as_str())),
            ("class", self.class.as_str().into()),
            ("message", self.message.as_str().into()),
            ("retry_after_ms", self.retry_after_ms.into()),
            ("field", self.field.clone().into()),
            ("task_id", self.task_id.clone().into()),
        ])
    }

    /// Reads the form [`Failure::to_json`] writes.
    pub fn from_json(value: &Json<'_>) -> Result<Failure, String> {
        let f = Fields::new(value, "failure", &["code", "class", "message", "retry_after_ms", "field", "task_id"])?;
        Ok(Failure {
            code: f.str("code")?.to_owned(),
            class: f.name("class", Class::parse)?,
            message: f.str("message")?.to_owned(),
            retry_after_ms: f.opt_u64("retry_after_ms")?,
            field: f.opt_string("field")?,
            task_id: f.opt_string("task_id")?,
        })
    }
}

/// A solved captcha.
#[derive(Clone, Debug, PartialEq, Eq)]
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

    /// `{"answer": {"text"|"json": ..}, "user_agent", "task_id", "submitted_at", "solved_at",
    /// "elapsed_ms", "polls", "attempts", "expires_at"}`.
    pub fn to_json(&self) -> Json<'_> {
        Json::object([
            ("answer", self.answer.to_json()),
            ("user_agent", self.user_agent.clone().into()),
            ("task_id", self.task_id.clone().into()),
            ("submitted_at", self.submitted_at.into()),
            ("solved_at", self.solved_at.into()),
            ("elapsed_ms", self.elapsed_ms.into()),
            ("polls", self.polls.into()),
            ("attempts", self.attempts.into()),
            ("expires_at", self.expires_at.into()),
        ])
    }

    /// The solution as the JSON object a client gets (the WIT's `solution-json`): like
    /// [`Solution::to_json`], but `answer` is the text itself, or the structured answer's JSON value.
    pub fn client_json(&self) -> String {
        let answer = match &self.answer {
            Answer::Text(text) => Json::from(text.as_str()),
            Answer::Json(text) => Json::parse(text).unwrap_or_else(|_| Json::from(text.as_str())),
        };
        Json::object([
            ("answer", answer),
            ("user_agent", self.user_agent.clone().into()),
            ("task_id", self.task_id.clone().into()),
            ("submitted_at", self.submitted_at.into()),
            ("solved_at", self.solved_at.into()),
            ("elapsed_ms", self.elapsed_ms.into()),
            ("polls", self.polls.into()),
            ("attempts", self.attempts.into()),
            ("expires_at", self.expires_at.into()),
        ])
        .to_text()
    }

    /// Reads the form [`Solution::to_json`] writes.
    pub fn from_json(value: &Json<'_>) -> Result<Solution, String> {
        let allowed = [
            "answer",
            "user_agent",
            "task_id",
            "submitted_at",
            "solved_at",
            "elapsed_ms",
            "polls",
            "attempts",
            "expires_at",
        ];
        let f = Fields::new(value, "solution", &allowed)?;
        Ok(Solution {
            answer: Answer::from_json(f.value("answer")?)?,
            user_agent: f.opt_string("user_agent")?,
            task_id: f.opt_string("task_id")?,
            submitted_at: f.u64("submitted_at")?,
            solved_at: f.u64("solved_at")?,
            elapsed_ms: f.u64("elapsed_ms")?,
            polls: f.u32("polls")?,
            attempts: f.u32("attempts")?,
            expires_at: f.opt_u64("expires_at")?,
        })
    }
}

/// A solved value: an opaque token or text, or a structured answer as compact JSON
/// (grid and BLS cell lists, GeeTest and Lemin objects).
#[derive(Clone, Debug, PartialEq, Eq)]
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
    pub fn as_json(&self) -> Option<Json<'_>> {
        match self {
            Answer::Json(s) => Json::parse(s).ok(),
            Answer::Text(_) => None,
        }
    }

    /// `{"text": "..."}` or `{"json": "..."}`.
    pub fn to_json(&self) -> Json<'_> {
        match self {
            Answer::Text(s) => Json::object([("text", Json::from(s.as_str()))]),
            Answer::Json(s) => Json::object([("json", Json::from(s.as_str()))]),
        }
    }

    fn from_json(value: &Json<'_>) -> Result<Answer, String> {
        match single(value, "answer")? {
            ("text", Json::String(s)) => Ok(Answer::Text(s.to_string())),
            ("json", Json::String(s)) => Ok(Answer::Json(s.to_string())),
            _ => Err("answer must be {\"text\": string} or {\"json\": string}".into()),
        }
    }
}
