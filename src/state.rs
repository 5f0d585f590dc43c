//! The persisted state of a solve: everything a snapshot holds besides the task and config, and
//! how snapshots of older versions read back into it. Plain data: the state machine
//! ([`crate::Solve`]) changes it, the snapshot format ([`crate::snapshot`]) writes and reads it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::outcome::{Failure, Solution};

/// The whole in-flight state (what a snapshot holds besides the task and config). Snapshots
/// write it with [`Serialize`]; [`StateJson`] reads it back.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct State {
    /// The latest time this solve has been given.
    pub now: u64,
    /// The id of the request the `Ready` step sends (ids start at 1).
    pub next_id: u32,
    pub phase: Phase,
    /// When the original submit was due (its `at`): the deadline counts from here.
    pub started_at: Option<u64>,
    /// Tasks submitted so far for this solve (1 + fresh resubmissions).
    pub attempt: u32,
    pub submit_retries: u32,
    /// Consecutive failed polls.
    pub poll_errors: u32,
    /// Times every thread was busy and the submit waited.
    pub busy_rounds: u32,
    pub polls: u32,
    pub task_id: Option<Arc<str>>,
    /// Jitter generator state.
    pub rng: u64,
    /// The failure reported if the deadline passes before the scheduled step can run (`None`:
    /// DEADLINE_EXCEEDED).
    pub pending: Option<Failure>,
}

/// In JSON: `{"ready": {"step", "at"}}`, `{"solved": <solution>}` or `{"failed": <failure>}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    /// `step` is sent (as request `next_id`) at `at`; it stays so until its result is fed back.
    Ready {
        step: Step,
        at: u64,
    },
    Solved(Solution),
    Failed(Failure),
}

/// In JSON: `submit`, `threads_info` or `poll`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Step {
    Submit,
    ThreadsInfo,
    Poll,
}

/// A state as snapshots of version 1 or 2 hold it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StateJson {
    now: u64,
    next_id: u32,
    phase: PhaseJson,
    started_at: Option<u64>,
    attempt: u32,
    submit_retries: u32,
    poll_errors: u32,
    busy_rounds: u32,
    polls: u32,
    task_id: Option<Arc<str>>,
    rng: u64,
    pending: Option<Failure>,
}

/// A phase as snapshots hold it; version 1 also had `awaiting` (a request in flight).
#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum PhaseJson {
    Ready { step: Step, at: u64 },
    Awaiting { step: Step, id: u32, sent_at: u64 },
    Solved(Solution),
    Failed(Failure),
}

impl StateJson {
    /// The state of a snapshot of `version` (1 or 2). A version-1 `awaiting` phase becomes
    /// `Ready` for that request again, so it is sent once more.
    pub(crate) fn into_state(self, version: u64) -> Result<State, String> {
        let (mut next_id, mut polls) = (self.next_id, self.polls);
        let phase = match self.phase {
            PhaseJson::Ready { step, at } => Phase::Ready { step, at },
            PhaseJson::Awaiting { step, id, sent_at } if version == 1 => {
                next_id = id;
                if step == Step::Poll {
                    polls = polls.saturating_sub(1);
                }
                Phase::Ready { step, at: sent_at }
            }
            PhaseJson::Awaiting { .. } => {
                return Err(format!("unknown phase `awaiting` in a version {version} snapshot"));
            }
            PhaseJson::Solved(solution) => Phase::Solved(solution),
            PhaseJson::Failed(failure) => Phase::Failed(failure),
        };
        Ok(State {
            now: self.now,
            next_id,
            phase,
            started_at: self.started_at,
            attempt: self.attempt,
            submit_retries: self.submit_retries,
            poll_errors: self.poll_errors,
            busy_rounds: self.busy_rounds,
            polls,
            task_id: self.task_id,
            rng: self.rng,
            pending: self.pending,
        })
    }
}
