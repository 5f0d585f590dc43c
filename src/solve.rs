//! The solve state machine.
//!
//! A host drives one solve by calling [`Solve::poll_output`] once with the current time and
//! acting on the [`Output`]: sleep until the request's `at`, send it, and feed the result back
//! with [`Solve::handle_response`] (or [`Solve::handle_transport_error`]), which returns the next
//! output; until a terminal result. A full solve (submit, three not-ready polls, the answer) is
//! seven calls: create, one `poll_output`, five `handle_response`.
//!
//! The state only changes when a result is fed back: until then the solve stays `Ready`, so a
//! snapshot taken while a request is out (or before sending it) resends the same request.
//!
//! ```text
//!   Ready(submit @ now) ──id──▶ Ready(poll @ +initial wait) ──not ready──▶ Ready(poll @ +interval) ─┐
//!      ▲   ▲    │ ZERO_BALANCE                        ▲                                             │
//!      │   └────┴─ Ready(threadsinfo @ now) ─busy: +8 s  └─────────────────────────────────────────────┘
//!      └────────── unsolvable: fresh task (bounded) ◀── answer ──▶ Solved      permanent ──▶ Failed
//! ```
//!
//! Every decision comes from the code table (`codes.rs`: what each code does at each step, the
//! `threadsinfo` verdict, the backoff curves) and the type registry (`registry.rs`: fields,
//! timings, where the answer is and its shape).

use std::sync::Arc;

use rand_core::{Rng as _, SeedableRng as _};
use rand_xoshiro::SplitMix64;

use crate::answer;
use crate::codes::{self, Action, CodeInfo};
use crate::config::{Config, Timings};
use crate::error::{Misuse, ValidationError};
use crate::http::{self, ApiKey, HttpRequest, KeySlot, RequestKind, TransportError};
use crate::outcome::{Failure, Solution};
use crate::reply::{self, Field, Reply};
use crate::schedule::Gap;
use crate::snapshot::{self, RestoreError};
use crate::solve_times::SolveTimes;
use crate::state::{Phase, State, Step};
use crate::task::{Task, Upload};
use crate::text;

/// What the host should do next. Not `#[non_exhaustive]` on purpose: a host must act on every
/// output, so a new kind of output would change the driving contract, which a host should learn
/// from the compiler.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// Sleep until the request's `at` (epoch ms), send it, then feed back its reply or transport
    /// error. Asking again before that returns the same request.
    Send(HttpRequest),
    /// Terminal and sticky: every later call returns the same.
    Solved(Solution),
    /// Terminal and sticky: every later call returns the same.
    Failed(Failure),
}

/// One in-flight solve. Holds the API key in memory only; snapshots never contain it. A keyless
/// solve ([`Solve::keyless`]) holds no key at all: its requests hold a placeholder that the
/// host replaces with [`HttpRequest::with_key`] at send time.
pub struct Solve {
    key: KeySlot,
    task: Task,
    config: Config,
    timings: Timings,
    /// The longer wait of the schedule a [`SolveTimes`] model gave: after that many regular polls
    /// that found nothing, a wait longer than the poll interval.
    gap: Option<Gap>,
    derived: Derived,
    state: State,
}

/// Values computed from the task and config, never serialized.
struct Derived {
    submit_url: Arc<str>,
    res_url: Arc<str>,
    /// The whole submit body of form uploads (it holds the key: memory only).
    submit_body: Option<http::FormBody>,
    /// The poll body for the current task id, built on first use (cleared by
    /// [`Solve::set_task_id`]).
    poll_body: Option<http::FormBody>,
    /// The unchanging start of every snapshot, built on first use.
    snapshot_prefix: std::cell::OnceCell<String>,
}

impl Solve {
    /// Starts a solve at `now`. Validates the config against the task's type; nothing is sent
    /// until the first [`Solve::poll_output`].
    pub fn new(task: Task, key: ApiKey, config: &Config, now: u64) -> Result<Solve, ValidationError> {
        Solve::begin(task, KeySlot::Key(key), config, now)
    }

    /// Like [`Solve::new`], without the key: for hosts that store every request they send (a
    /// durable workflow's history, which operators read). Every request it asks for is
    /// [`HttpRequest::is_keyless`]: it holds [`crate::KEY_PLACEHOLDER`] where the key goes, and
    /// the host sends what [`HttpRequest::with_key`] makes of it, which is byte for byte the
    /// request [`Solve::new`] with the key asks for at the same point. Replies are fed back with
    /// the key removed ([`ApiKey::redact`]: the solve has no key to remove), and then every
    /// decision is the one a solve with the key makes. Its snapshots are the same format:
    /// [`Solve::restore`] with the key continues one as a solve with the key, and
    /// [`Solve::restore_keyless`] any snapshot without.
    pub fn keyless(task: Task, config: &Config, now: u64) -> Result<Solve, ValidationError> {
        Solve::begin(task, KeySlot::Placeholder, config, now)
    }

    fn begin(task: Task, key: KeySlot, config: &Config, now: u64) -> Result<Solve, ValidationError> {
        let (config, timings) = config.resolve(task.spec())?;
        let state = State {
            now,
            next_id: 1,
            phase: Phase::Ready { step: Step::Submit, at: now },
            started_at: Some(now),
            attempt: 1,
            submit_retries: 0,
            poll_errors: 0,
            busy_rounds: 0,
            polls: 0,
            task_id: None,
            rng: config.jitter_seed.unwrap_or(0),
            pending: None,
        };
        Ok(Solve::assemble(key, task, config, timings, state))
    }

    /// Like [`Solve::new`], with the poll schedule `model` gives once it has enough observations
    /// ([`SolveTimes`]): the schedule of least expected cost for the config's `poll_cost_ms`, or
    /// for a few solves (chosen by a hash of `now`) an exploring one with an earlier first poll.
    /// Its first wait is kept before the deadline by one poll interval; its longer wait, if any,
    /// is kept in the snapshot. A config that sets `initial_wait_ms` keeps the table's schedule
    /// with that first wait. A model of another captcha type is an `INVALID_CONFIG` error
    /// naming `solve_times`. Without a usable model this is exactly [`Solve::new`].
    pub fn with_solve_times(
        task: Task,
        key: ApiKey,
        config: &Config,
        model: &SolveTimes,
        now: u64,
    ) -> Result<Solve, ValidationError> {
        Solve::begin_with_solve_times(task, KeySlot::Key(key), config, model, now)
    }

    /// [`Solve::with_solve_times`] without the key: a keyless solve ([`Solve::keyless`]).
    pub fn keyless_with_solve_times(
        task: Task,
        config: &Config,
        model: &SolveTimes,
        now: u64,
    ) -> Result<Solve, ValidationError> {
        Solve::begin_with_solve_times(task, KeySlot::Placeholder, config, model, now)
    }

    fn begin_with_solve_times(
        task: Task,
        key: KeySlot,
        config: &Config,
        model: &SolveTimes,
        now: u64,
    ) -> Result<Solve, ValidationError> {
        if model.task_type() != task.spec().name {
            return Err(crate::error::invalid_config(
                "solve_times",
                format!("the solve-times model is of {}, the task is {}", model.task_type(), task.spec().name),
            ));
        }
        let Some((planned, _)) = model.schedule(config, now) else { return Solve::begin(task, key, config, now) };
        model.created_with(config.poll_cost_ms);
        let (_, timings) = config.resolve(task.spec())?;
        let latest = timings.deadline_ms.saturating_sub(timings.poll_interval_ms);
        let wait = planned.first_wait_ms.min(latest);
        if crate::config::INITIAL_WAIT_MS.check(wait).is_err() {
            return Solve::begin(task, key, config, now);
        }
        let mut solve = Solve::begin(task, key, &Config { initial_wait_ms: Some(wait), ..config.clone() }, now)?;
        let Timings { initial_wait_ms, poll_interval_ms, deadline_ms } = solve.timings;
        solve.gap = planned.gap.filter(|gap| {
            let before = gap.last_regular_poll_ms(initial_wait_ms, poll_interval_ms);
            gap.wait_ms > poll_interval_ms && before.saturating_add(gap.wait_ms) < deadline_ms
        });
        Ok(solve)
    }

    /// Validates task JSON, key and config together, as every host-facing interface does: any
    /// problem is a permanent [`Failure`] naming the field, with nothing sent.
    pub fn from_json(task_json: &str, key: &str, config: &Config, now: u64) -> Result<Solve, Failure> {
        let key = ApiKey::new(key)?;
        let task = Task::from_json(task_json)?;
        Ok(Solve::new(task, key, config, now)?)
    }

    /// [`Solve::from_json`] without the key: a keyless solve ([`Solve::keyless`]).
    pub fn keyless_from_json(task_json: &str, config: &Config, now: u64) -> Result<Solve, Failure> {
        let task = Task::from_json(task_json)?;
        Ok(Solve::keyless(task, config, now)?)
    }

    /// Continues a solve from [`Solve::snapshot`], with the key supplied again. The restored
    /// solve makes exactly the decisions the original would have.
    /// The key is taken as text and checked as [`Solve::from_json`] does
    /// ([`RestoreError::Key`]).
    pub fn restore(snapshot: &str, key: &str) -> Result<Solve, RestoreError> {
        let key = ApiKey::new(key).map_err(RestoreError::Key)?;
        Solve::restored(KeySlot::Key(key), snapshot::read(snapshot)?)
    }

    /// Continues a solve from any snapshot as a keyless solve ([`Solve::keyless`]): the same
    /// decisions, with requests that hold the placeholder instead of the key.
    pub fn restore_keyless(snapshot: &str) -> Result<Solve, RestoreError> {
        Solve::restored(KeySlot::Placeholder, snapshot::read(snapshot)?)
    }

    /// Continues a solve from a snapshot kept as its two parts, [`Solve::snapshot_base`] (stored
    /// once) and a later [`Solve::snapshot_state`]: the same as restoring the whole snapshot.
    pub fn restore_parts(base: &str, state: &str, key: &str) -> Result<Solve, RestoreError> {
        let key = ApiKey::new(key).map_err(RestoreError::Key)?;
        Solve::restored(KeySlot::Key(key), snapshot::read_parts(base, state)?)
    }

    fn restored(key: KeySlot, restored: snapshot::Restored) -> Result<Solve, RestoreError> {
        let snapshot::Restored { task, config, gap, state } = restored;
        let (config, timings) =
            config.resolve(task.spec()).map_err(|e| RestoreError::Invalid(format!("config: {e}")))?;
        check_state(&state, &config)?;
        if gap.is_some_and(|gap| gap.wait_ms <= timings.poll_interval_ms || gap.wait_ms >= timings.deadline_ms) {
            return Err(RestoreError::Invalid("second_wait_ms is out of range".into()));
        }
        let mut solve = Solve::assemble(key, task, config, timings, state);
        solve.gap = gap;
        match solve.state.phase {
            // The engine schedules nothing at or after the deadline but the last poll, due
            // before its window ends: anything else there is forged.
            Phase::Ready { step, at } if solve.deadline().is_some_and(|deadline| at >= deadline) => {
                match solve.last_poll_until() {
                    Some(until) if step == Step::Poll && at < until => Ok(solve),
                    _ => Err(RestoreError::Invalid("the next step is due after the deadline".into())),
                }
            }
            _ => Ok(solve),
        }
    }

    fn assemble(key: KeySlot, task: Task, config: Config, timings: Timings, state: State) -> Solve {
        let endpoint = if task.is_sync() { "/solve.php" } else { "/in.php" };
        let submit_body = (task.upload() == Upload::Form).then(|| {
            // Sized once (escapes add an eighth at most for a base64 image): no regrowth.
            let mut plain = 0;
            task.each_param(|name, value| plain += name.len() + value.len() + 2);
            let mut form = http::FormWriter::new(&key, plain + plain / 8 + 16);
            task.each_param(|name, value| form.push(name, value));
            form.finish()
        });
        let derived = Derived {
            submit_url: crate::config::endpoint_url(&config.base_url, endpoint),
            res_url: crate::config::endpoint_url(&config.base_url, "/res.php"),
            submit_body,
            poll_body: None,
            snapshot_prefix: Default::default(),
        };
        Solve { key, task, config, timings, gap: None, derived, state }
    }

    /// The whole in-flight state as a small versioned JSON string, without the key. It does
    /// hold the task (with any proxy credentials and cookies in it).
    pub fn snapshot(&self) -> String {
        snapshot::write(self.snapshot_prefix(), &self.state)
    }

    /// The part of the snapshot that never changes during a solve: format, version, task and
    /// config (an image task's image is here). Keep it once per solve and checkpoint only
    /// [`Solve::snapshot_state`]; [`Solve::restore_parts`] takes both.
    pub fn snapshot_base(&self) -> String {
        snapshot::base(self.snapshot_prefix())
    }

    /// The part of the snapshot that changes with each result: the solve's progress, a few
    /// hundred bytes whatever the task (no task data, never the key).
    pub fn snapshot_state(&self) -> String {
        snapshot::state(&self.state)
    }

    fn snapshot_prefix(&self) -> &str {
        self.derived.snapshot_prefix.get_or_init(|| snapshot::prefix(&self.task, &self.config, self.gap))
    }

    /// The validated task.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The config the solve runs with (base URL normalised).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The current CaptchaAI task id, once a submit was accepted.
    pub fn task_id(&self) -> Option<&str> {
        self.state.task_id.as_deref()
    }

    /// When the solve's deadline passes (epoch ms), counted from the original submit (due when
    /// the solve was created). `None` only for a version-1 snapshot restored before its submit.
    pub fn deadline(&self) -> Option<u64> {
        self.state.started_at.map(|start| start.saturating_add(self.timings.deadline_ms))
    }

    /// The latest time the solve can still wait on CaptchaAI (epoch ms), known from its start:
    /// one request timeout after the later of its deadline and the end of its last-poll window
    /// (the original submit plus the type's token lifetime, for a type whose lifetime is known
    /// and longer than the deadline; see [`Solve::poll_output`]). Nothing but that last poll is
    /// sent at or after the deadline, and it only before its window ends, so every request is
    /// answered or timed out by then and a task the solve submitted is no longer polled
    /// afterwards (by a host that sends each request when it is asked to).
    pub fn ends_by(&self) -> Option<u64> {
        let deadline = self.deadline()?;
        let last = self.last_poll_until().map_or(deadline, |until| until.max(deadline));
        Some(last.saturating_add(self.config.request_timeout_ms))
    }

    /// When the last-poll window ends (epoch ms): the original submit plus the type's token
    /// lifetime, where that lifetime is known and the window ends after the deadline. An answer
    /// cannot be older than its task's submit, so until then any answer the task has is still
    /// usable. `None`: the solve never polls at or after its deadline.
    fn last_poll_until(&self) -> Option<u64> {
        let lifetime = self.task.spec().token_ttl_ms?;
        let until = self.state.started_at?.saturating_add(lifetime);
        self.deadline().filter(|&deadline| until > deadline).map(|_| until)
    }

    /// Whether the request awaited is the last poll (the only step ever due at or after the
    /// deadline).
    fn last_poll_out(&self) -> bool {
        matches!(self.state.phase, Phase::Ready { step: Step::Poll, at }
            if self.deadline().is_some_and(|deadline| at >= deadline))
    }

    /// Whether this solve holds no key ([`Solve::keyless`]): its requests hold the placeholder.
    pub fn is_keyless(&self) -> bool {
        matches!(self.key, KeySlot::Placeholder)
    }

    /// Whether the solve has reached a terminal output.
    pub fn is_finished(&self) -> bool {
        matches!(self.state.phase, Phase::Solved(_) | Phase::Failed(_))
    }

    /// What to do at `now` (epoch ms): the request to send at its `at`, or the terminal outcome.
    ///
    /// Asked at or after the deadline, a solve whose next request was still to be sent fails
    /// here (with the failure it was waiting on, else `DEADLINE_EXCEEDED`), with one exception,
    /// **the last poll**: a solve waiting to poll its task (a task id known, every result so far
    /// fed back before the deadline) asked before its last-poll window ends (the original submit
    /// plus the type's token lifetime: turnstile's 300 s against its 120 s deadline) sends that
    /// poll once more, due at `now`. An answer it brings back before the window ends is the
    /// solution (its `expires_at` the window's end: the answer may have waited since the
    /// submit); anything else it brings (not ready, an unreadable reply, a transport error, an
    /// answer after the window) ends the solve as a result at or after the deadline always does:
    /// the code table's failure for a code that fails, else `DEADLINE_EXCEEDED`. Nothing else is
    /// ever sent at or after the deadline, and nothing at all once the window has ended. A result
    /// fed back at or after the deadline never schedules a request, so a poll already answered
    /// then is the solve's last. The decision reads only the persisted state: a snapshot taken
    /// before the deadline and restored after it decides the same.
    pub fn poll_output(&mut self, now: u64) -> Result<Output, Misuse> {
        self.check_time(now)?;
        self.state.now = now;
        Ok(self.output(now))
    }

    /// Feeds back the reply to request `request_id`, received at `now`, and returns the next
    /// output. The body is read as text: invalid UTF-8 becomes U+FFFD first
    /// (`String::from_utf8_lossy`), exactly as every host of the component passes it.
    pub fn handle_response(&mut self, now: u64, request_id: u32, status: u16, body: &[u8]) -> Result<Output, Misuse> {
        let step = self.take_result(now, request_id)?;
        let text;
        let reply = if reply::is_plain_not_ready(body) {
            Reply::NotReady
        } else {
            // A reply that echoes the key loses it before anything reads (or clips) the text.
            text = crate::text::redact(crate::text::lossy(body), self.key.secret());
            reply::parse(status, &text, self.task.spec().answer_from)
        };
        match step {
            Step::Submit => self.on_submit_reply(now, reply),
            Step::Poll => self.on_poll_reply(now, reply),
            Step::ThreadsInfo => self.on_threads_reply(now, reply),
        }
        Ok(self.output(now))
    }

    /// Reports that request `request_id` failed without a reply at `now` (a host times a request
    /// out after its `timeout_ms`), and returns the next output.
    pub fn handle_transport_error(
        &mut self,
        now: u64,
        request_id: u32,
        error: TransportError,
    ) -> Result<Output, Misuse> {
        let step = self.take_result(now, request_id)?;
        self.on_transport(now, step, error);
        Ok(self.output(now))
    }

    /// The output at `now`: the terminal result, the deadline failure if the next request can
    /// no longer go out in time, or that request (at or after the deadline: the last poll, due
    /// at `now` the first time it is asked for).
    fn output(&mut self, now: u64) -> Output {
        if let Phase::Ready { step, at } = self.state.phase
            && let Some(deadline) = self.deadline().filter(|&deadline| now >= deadline)
        {
            match self.last_poll_until() {
                Some(until) if step == Step::Poll && now < until => {
                    if at < deadline {
                        self.state.phase = Phase::Ready { step, at: now };
                    }
                }
                _ => {
                    let failure = self.state.pending.take().unwrap_or_else(|| self.deadline_failure());
                    self.finish_failed(failure);
                }
            }
        }
        match self.state.phase {
            Phase::Solved(ref solution) => Output::Solved(solution.clone()),
            Phase::Failed(ref failure) => Output::Failed(failure.clone()),
            Phase::Ready { step, at } => Output::Send(self.request(step, at)),
        }
    }

    /// Checks that `request_id` is the request due now and records it as sent: a result for it
    /// has come back.
    fn take_result(&mut self, now: u64, request_id: u32) -> Result<Step, Misuse> {
        self.check_time(now)?;
        let (step, at) = match self.state.phase {
            Phase::Ready { step, at } if request_id == self.state.next_id => (step, at),
            _ if request_id >= 1 && request_id < self.state.next_id => {
                return Err(Misuse::StaleResponse { request_id });
            }
            _ => return Err(Misuse::UnknownRequest { request_id }),
        };
        if now < at {
            return Err(Misuse::NotDue { request_id, at });
        }
        self.state.now = now;
        self.state.next_id = request_id.saturating_add(1);
        self.state.started_at.get_or_insert(at);
        if step == Step::Poll {
            self.state.polls = self.state.polls.saturating_add(1);
        }
        self.state.pending = None;
        Ok(step)
    }

    fn check_time(&self, now: u64) -> Result<(), Misuse> {
        if now < self.state.now {
            return Err(Misuse::TimeWentBackwards { last: self.state.now, now });
        }
        Ok(())
    }

    /// The request for `step`, due at `at`, with id `next_id`.
    fn request(&mut self, step: Step, at: u64) -> HttpRequest {
        let id = self.state.next_id;
        let timeout = self.config.request_timeout_ms;
        match step {
            Step::Submit => self.submit_request(id, at, timeout),
            Step::ThreadsInfo => {
                let body = http::FormWriter::new(&self.key, 24).pair("action", "threadsinfo").finish();
                HttpRequest::form(id, RequestKind::ThreadsInfo, at, self.derived.res_url.clone(), body, timeout)
            }
            Step::Poll => {
                let (key, task_id) = (&self.key, self.state.task_id.as_deref().unwrap_or_default());
                let body = self
                    .derived
                    .poll_body
                    .get_or_insert_with(|| {
                        http::FormWriter::new(key, 40).pair("action", "get").pair("id", task_id).finish()
                    })
                    .clone();
                HttpRequest::form(id, RequestKind::Poll, at, self.derived.res_url.clone(), body, timeout)
            }
        }
    }

    fn submit_request(&self, id: u32, at: u64, timeout: u64) -> HttpRequest {
        let url = self.derived.submit_url.clone();
        match (self.task.upload(), self.task.image()) {
            (Upload::Multipart, Some(image)) => {
                let bytes = image.bytes();
                let params = self.task.params();
                HttpRequest::multipart(id, at, url, http::multipart_body(&self.key, &params, image, &bytes), timeout)
            }
            _ => {
                let body =
                    self.derived.submit_body.clone().unwrap_or_else(|| http::FormWriter::new(&self.key, 0).finish());
                HttpRequest::form(id, RequestKind::Submit, at, url, body, timeout)
            }
        }
    }

    fn on_submit_reply(&mut self, now: u64, reply: Reply) {
        match reply {
            Reply::Ok { value, .. } if garbled(&value) => {
                self.on_code(now, Step::Submit, unexpected_reply(), "", GARBLED)
            }
            Reply::Ok { value, user_agent } if self.task.is_sync() => self.finish_solved(now, &value, user_agent),
            Reply::Ok { value, .. } => match task_id_of(&value) {
                Some(task_id) => {
                    self.set_task_id(Some(task_id));
                    self.state.poll_errors = 0;
                    self.schedule(Step::Poll, now.saturating_add(self.timings.initial_wait_ms), None);
                }
                None => self.on_code(now, Step::Submit, unexpected_reply(), "", " (the submit reply held no task id)"),
            },
            other => self.on_other_reply(now, Step::Submit, other),
        }
    }

    fn on_poll_reply(&mut self, now: u64, reply: Reply) {
        match reply {
            Reply::Ok { value, .. } if garbled(&value) => {
                self.on_code(now, Step::Poll, unexpected_reply(), "", GARBLED)
            }
            Reply::Ok { value, user_agent } => self.finish_solved(now, &value, user_agent),
            other => self.on_other_reply(now, Step::Poll, other),
        }
    }

    /// Codes, not-ready and unreadable replies, through the code table.
    fn on_other_reply(&mut self, now: u64, step: Step, reply: Reply) {
        match reply {
            Reply::NotReady => self.on_code(now, step, code_info(codes::NOT_READY), "", ""),
            Reply::Code { code, text } => {
                let detail = text.map(|t| format!(" ({})", crate::text::clip(&t, 200))).unwrap_or_default();
                self.on_code(now, step, code_info_wire(&code), &code, &detail)
            }
            Reply::Unexpected { status, what } => {
                self.on_code(now, step, unexpected_reply(), "", &format!(": HTTP {status} with {what}"))
            }
            Reply::Ok { .. } | Reply::Threads { .. } => {
                self.on_code(now, step, unexpected_reply(), "", " (a reply of the wrong kind)")
            }
        }
    }

    /// The `threadsinfo` answer, asked for after ERROR_ZERO_BALANCE: its counts (read through
    /// [`codes::THREADS_FREE`] and [`codes::THREADS_BUSY`]) or its code decide, by the row's
    /// `threads_info` action, between failing and waiting for a thread.
    fn on_threads_reply(&mut self, now: u64, reply: Reply) {
        const NO_ANSWER: &str = "no free threads (threadsinfo gave no usable answer)";
        let (info, code, reason) = match reply {
            // "All busy" is a plan with threads, every one working; anything else has one free.
            Reply::Threads { threads, working } if threads > 0 && working >= threads => {
                (&codes::THREADS_BUSY, None, format!("all {threads} plan threads are busy ({working} working)"))
            }
            Reply::Threads { threads, working } => (
                &codes::THREADS_FREE,
                None,
                format!(
                    "ERROR_ZERO_BALANCE while threadsinfo shows free threads ({working} of {threads} busy): \
                     the plan has expired or is not active"
                ),
            ),
            Reply::Code { code, .. } => {
                let info = code_info_wire(&code);
                let reason = match info.on.threads_info {
                    Action::Fail => format!("threadsinfo answered {code}: {}", info.meaning),
                    _ => NO_ANSWER.to_owned(),
                };
                (info, Some(code), reason)
            }
            Reply::NotReady => (code_info(codes::NOT_READY), None, NO_ANSWER.to_owned()),
            Reply::Ok { .. } | Reply::Unexpected { .. } => (unexpected_reply(), None, NO_ANSWER.to_owned()),
        };
        self.after_threads_info(now, info, code.as_deref().unwrap_or(info.code), reason);
    }

    /// Applies `info`'s `threads_info` action: fail with `reason` as the message, or wait for a
    /// thread (the column holds no other action).
    fn after_threads_info(&mut self, now: u64, info: &CodeInfo, code: &str, reason: String) {
        match info.on.threads_info {
            Action::Fail => {
                let failure = self.failure(info, code, info.class, reason);
                self.finish_failed(failure);
            }
            _ => self.wait_for_thread(now, reason),
        }
    }

    fn on_transport(&mut self, now: u64, step: Step, error: TransportError) {
        let info = code_info(codes::TRANSPORT_ERROR);
        if step == Step::ThreadsInfo {
            let reason = format!("no free threads (threadsinfo failed: {})", error.as_str());
            return self.after_threads_info(now, info, info.code, reason);
        }
        self.on_code(now, step, info, "", &format!(" ({})", error.as_str()));
    }

    /// Applies the table's action for `info` at `step` (a submit or a poll). `raw` is the wire
    /// code (empty: use the row's own code); `detail` is appended to the row's meaning.
    fn on_code(&mut self, now: u64, step: Step, info: &'static CodeInfo, raw: &str, detail: &str) {
        let code = if raw.is_empty() { info.code } else { raw };
        // Built only where a failure is reported or kept for the deadline.
        let failure = |this: &Self| this.failure(info, code, info.class, format!("{}{detail}", info.meaning));
        let action = if step == Step::Poll { info.on.poll } else { info.on.submit };
        match (action, step) {
            (Action::PollAgain, Step::Poll) => {
                self.state.poll_errors = 0;
                let wait = match self.gap {
                    // The regular polls of the first task before the learned gap found nothing:
                    // skip it, unless that would pass the deadline.
                    Some(Gap { after_polls, wait_ms })
                        if self.state.polls == after_polls
                            && self.state.attempt == 1
                            && self.deadline().is_none_or(|deadline| now.saturating_add(wait_ms) < deadline) =>
                    {
                        wait_ms
                    }
                    _ => self.timings.poll_interval_ms,
                };
                self.schedule(Step::Poll, now.saturating_add(wait), None);
            }
            (Action::Retry, Step::Poll) => {
                self.state.poll_errors = self.state.poll_errors.saturating_add(1);
                if self.state.poll_errors > self.config.max_poll_errors {
                    return self.finish_failed(failure(self));
                }
                let wait = codes::POLL_BACKOFF.wait(
                    self.state.poll_errors,
                    info.retry_after_ms,
                    self.timings.poll_interval_ms,
                );
                self.schedule(Step::Poll, now.saturating_add(wait), None);
            }
            (Action::Retry | Action::PollAgain, _) => {
                if self.state.submit_retries >= self.config.max_submit_retries {
                    return self.finish_failed(failure(self));
                }
                self.state.submit_retries = self.state.submit_retries.saturating_add(1);
                let wait = codes::SUBMIT_BACKOFF.wait(
                    self.state.submit_retries,
                    info.retry_after_ms,
                    self.timings.poll_interval_ms,
                );
                self.schedule(Step::Submit, now.saturating_add(wait), Some(failure(self)));
            }
            (Action::DiagnoseThreads, _) => self.schedule(Step::ThreadsInfo, now, Some(failure(self))),
            (Action::WaitForThread, _) => self.wait_for_thread(now, format!("no free slot ({code})")),
            (Action::Resubmit, _) => {
                if self.state.attempt > self.config.unsolvable_retries {
                    return self.finish_failed(failure(self));
                }
                self.state.attempt = self.state.attempt.saturating_add(1);
                self.set_task_id(None);
                self.state.submit_retries = 0;
                self.state.poll_errors = 0;
                self.schedule(Step::Submit, now, Some(failure(self)));
            }
            (Action::Fail, _) => self.finish_failed(failure(self)),
        }
    }

    /// Every thread is busy: wait, then submit again (within the deadline; past it, the
    /// [`codes::THREADS_BUSY`] failure).
    fn wait_for_thread(&mut self, now: u64, why: String) {
        self.state.busy_rounds = self.state.busy_rounds.saturating_add(1);
        let info = &codes::THREADS_BUSY;
        let failure = self.failure(info, info.code, info.class, format!("{why}; gave up at the deadline"));
        self.schedule(Step::Submit, now.saturating_add(codes::BUSY_WAIT_MS), Some(failure));
    }

    /// Schedules `step` at `at` (plus jitter), or fails with `if_late` (`None`: the deadline
    /// failure) when that is past the deadline: nothing is ever scheduled at or after the
    /// deadline (only [`Solve::output`] moves a poll there, as the last poll).
    fn schedule(&mut self, step: Step, at: u64, if_late: Option<Failure>) {
        let at = at.saturating_add(self.jitter());
        match self.deadline() {
            Some(deadline) if at >= deadline => {
                let failure = if_late.unwrap_or_else(|| self.deadline_failure());
                self.finish_failed(failure);
            }
            _ => {
                self.state.phase = Phase::Ready { step, at };
                self.state.pending = if_late;
            }
        }
    }

    fn finish_solved(&mut self, now: u64, value: &Field<'_>, user_agent: Option<String>) {
        let spec = self.task.spec();
        let submitted_at = self.state.started_at.unwrap_or(now);
        // The last poll's answer may have waited at CaptchaAI since the submit: it is usable
        // until the window's end, and only handed out before then.
        let expires_at = match self.last_poll_until() {
            Some(until) if self.last_poll_out() => {
                if now >= until {
                    let failure = self.deadline_failure();
                    return self.finish_failed(failure);
                }
                Some(until)
            }
            _ => spec.token_ttl_ms.map(|ttl| now.saturating_add(ttl)),
        };
        let solution = Solution {
            answer: answer::build(spec.answer, value),
            user_agent,
            task_id: self.state.task_id.clone(),
            submitted_at,
            solved_at: now,
            elapsed_ms: now.saturating_sub(submitted_at),
            polls: self.state.polls,
            attempts: self.state.attempt,
            expires_at,
        };
        self.state.pending = None;
        self.state.phase = Phase::Solved(solution);
    }

    /// The only way the task id changes: the cached poll body goes with the old one.
    fn set_task_id(&mut self, task_id: Option<Arc<str>>) {
        self.state.task_id = task_id;
        self.derived.poll_body = None;
    }

    fn finish_failed(&mut self, failure: Failure) {
        self.state.pending = None;
        self.state.phase = Phase::Failed(failure);
    }

    fn failure(&self, info: &CodeInfo, code: &str, class: codes::Class, message: String) -> Failure {
        Failure {
            code: code.to_owned(),
            class,
            message: crate::text::redact(message.into(), self.key.secret()).into_owned(),
            retry_after_ms: info.retry_after_ms,
            field: None,
            task_id: self.state.task_id.clone(),
        }
    }

    /// `DEADLINE_EXCEEDED`; its message says so when the last poll (the request awaited) was
    /// asked for.
    fn deadline_failure(&self) -> Failure {
        let info = code_info(codes::DEADLINE_EXCEEDED);
        let seconds = self.timings.deadline_ms / 1_000;
        let last_poll = if self.last_poll_out() { ", nor a usable one from the last poll after it" } else { "" };
        self.failure(info, info.code, info.class, format!("no answer within the {seconds} s deadline{last_poll}"))
    }

    /// Uniform jitter in `0..=max_jitter_ms` from the seeded generator (none without a seed):
    /// SplitMix64, whose 64-bit state is the snapshot's `rng`.
    fn jitter(&mut self) -> u64 {
        if self.config.jitter_seed.is_none() || self.config.max_jitter_ms == 0 {
            return 0;
        }
        let mut generator = SplitMix64::from_seed(self.state.rng.to_le_bytes());
        let draw = generator.next_u64();
        self.state.rng = u64::from_le_bytes(generator.state());
        draw % (self.config.max_jitter_ms + 1)
    }
}

fn code_info(code: &str) -> &'static CodeInfo {
    codes::lookup(code).unwrap_or(&codes::UNKNOWN)
}

fn code_info_wire(code: &str) -> &'static CodeInfo {
    codes::lookup_wire(code).unwrap_or(&codes::UNKNOWN)
}

fn unexpected_reply() -> &'static CodeInfo {
    code_info(codes::UNEXPECTED_REPLY)
}

const GARBLED: &str = " (the answer holds invalid UTF-8)";

/// Whether an answer holds U+FFFD: the reply had invalid UTF-8 there (hosts replace it with
/// U+FFFD), so the value is not what the service sent and must not be handed out.
fn garbled(value: &Field<'_>) -> bool {
    match value {
        // `text::find` (memchr on the first byte): `str::contains(char)` builds a two-way
        // searcher for a multi-byte char, ~650 guest instructions per answer.
        Field::Str(s) => text::find(s, "\u{FFFD}").is_some(),
        Field::Json(json) if !json.is_number() => text::find(&json.to_string(), "\u{FFFD}").is_some(),
        Field::Json(_) | Field::Bool(_) | Field::Null => false,
    }
}

/// A task id is a short run of printable characters, sent as a string or an integer.
fn task_id_of(value: &Field<'_>) -> Option<Arc<str>> {
    let mut digits = itoa::Buffer::new();
    let id = match value {
        Field::Str(s) => s.trim(),
        Field::Json(n) => digits.format(n.as_u64()?),
        _ => return None,
    };
    is_task_id(id).then(|| id.into())
}

fn is_task_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && !text::any_byte(id, |b| !b.is_ascii_graphic())
}

/// Consistency checks for restored state.
fn check_state(state: &State, config: &Config) -> Result<(), RestoreError> {
    let invalid = |why: &str| Err(RestoreError::Invalid(why.to_owned()));
    if state.next_id == 0 || state.attempt == 0 || state.attempt > config.unsolvable_retries + 1 {
        return invalid("counters out of range");
    }
    if state.started_at.is_some_and(|start| start > state.now) {
        return invalid("started_at is after now");
    }
    if state.task_id.as_deref().is_some_and(|id| id.trim() != id || !is_task_id(id)) {
        return invalid("task_id is malformed");
    }
    match state.phase {
        Phase::Ready { step: Step::Poll, .. } if state.task_id.is_none() => invalid("polling without a task id"),
        _ => Ok(()),
    }
}
