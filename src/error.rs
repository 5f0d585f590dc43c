//! Errors that are not solve outcomes: invalid input caught before anything is sent, and host
//! misuse. (A snapshot that cannot be restored is [`crate::RestoreError`], beside its format.)

use thiserror::Error;

use crate::codes::{self, Class, Problem};
use crate::outcome::Failure;

/// A task, config or key that failed validation. Nothing was sent; the message names the field
/// and never contains the API key.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct ValidationError {
    /// `INVALID_TASK`, `INVALID_CONFIG` or `INVALID_KEY`.
    pub code: &'static str,
    /// The offending field (`sitekey`, `images[3]`, `extra.key`, `deadline_ms`...), where one is to blame.
    pub field: Option<String>,
    /// What is wrong, naming the field.
    pub message: String,
    /// What is wrong, where CaptchaAI's codes tell cases apart (the endpoint's refusals read it).
    pub(crate) problem: Problem,
}

impl ValidationError {
    /// An error with this code (`INVALID_TASK`...), field and message.
    pub(crate) fn new(code: &'static str, field: Option<String>, message: impl Into<String>) -> Self {
        ValidationError { code, field, message: message.into(), problem: Problem::Invalid }
    }

    /// The same error, saying what is wrong.
    pub(crate) fn because(self, problem: Problem) -> Self {
        ValidationError { problem, ..self }
    }

    /// The same error as a permanent solve failure.
    pub fn into_failure(self) -> Failure {
        Failure {
            code: self.code.to_owned(),
            class: Class::Permanent,
            message: self.message,
            retry_after_ms: None,
            field: self.field,
            task_id: None,
        }
    }
}

impl From<ValidationError> for Failure {
    fn from(e: ValidationError) -> Failure {
        e.into_failure()
    }
}

/// The host broke the driving contract. The solve's state is unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Misuse {
    /// `now` is earlier than a time this solve has already been given.
    #[error("time went backwards: {now} ms is before {last} ms, which this solve has already seen")]
    TimeWentBackwards {
        /// The latest time the solve has seen.
        last: u64,
        /// The time given.
        now: u64,
    },
    /// No request with this id was ever sent by this solve.
    #[error("request {request_id} was never sent by this solve")]
    UnknownRequest {
        /// The id given.
        request_id: u32,
    },
    /// The request was sent but is no longer awaited (already answered, timed out, or the
    /// solve has finished).
    #[error("request {request_id} is no longer awaited")]
    StaleResponse {
        /// The id given.
        request_id: u32,
    },
    /// A result for a request that was not due before `at`: it was sent too early, which could
    /// poll CaptchaAI faster than it allows.
    #[error("request {request_id} was not due before {at} ms")]
    NotDue {
        /// The id given.
        request_id: u32,
        /// When the request was due.
        at: u64,
    },
}

impl Misuse {
    /// A stable snake_case name (used by the WIT interface and the vectors).
    pub fn kind(&self) -> &'static str {
        match self {
            Misuse::TimeWentBackwards { .. } => "time_went_backwards",
            Misuse::UnknownRequest { .. } => "unknown_request",
            Misuse::StaleResponse { .. } => "stale_response",
            Misuse::NotDue { .. } => "not_due",
        }
    }
}

/// A config field that failed validation.
pub(crate) fn invalid_config(field: &str, message: impl Into<String>) -> ValidationError {
    ValidationError::new(codes::INVALID_CONFIG, Some(field.to_owned()), message)
}

/// A task field that failed validation.
pub(crate) fn invalid_task(field: impl Into<String>, message: impl Into<String>) -> ValidationError {
    ValidationError::new(codes::INVALID_TASK, Some(field.into()), message)
}

/// "`field` <rule>", e.g. `field_must("pageurl", "must not be empty")`.
pub(crate) fn field_must(field: &str, rule: &str) -> ValidationError {
    invalid_task(field, format!("`{field}` {rule}"))
}
