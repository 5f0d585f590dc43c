//! Deterministic simulation of many engine solves in virtual time.
//!
//! Solves arrive at fixed virtual times (solve `i` is created at `EPOCH + i * arrival_gap_ms`),
//! each against its own seeded fake CaptchaAI ([`upstream`]) with faults; a share of them is
//! created with a learned solve-times model ([`models`]: a later or earlier first wait, a gap).
//! A discrete-event loop always jumps to the next wake-up: a solve's next request's `at`, a
//! reply's (or timeout's) arrival, or the next solve's creation. No IO, no clock, no threads: the same seed gives the
//! same run.
//!
//! A `stall_rate` share of solves has a host that stalls once (a store outage, a paused
//! process): before its second, third or fourth request it sleeps up to 400 s longer, then asks
//! the solve for its output again, as a host restored from its store does.
//!
//! Every solve is checked:
//! - no request is due at or after the deadline, but the last poll of a stalled host: a poll due
//!   when the host asked, before the submit plus the type's token lifetime, at most one per
//!   solve; every request is answered or timed out by `ends_by`, which must equal the later of
//!   the deadline and that window's end, plus one request timeout; a solve whose host never
//!   stalled ends by its deadline + one request timeout, a stalled one by `ends_by` or when its
//!   host woke (deadlines, lifetimes and `ends_by` computed independently from the README's
//!   type table and config);
//! - its requests (kind and due time) and outcome (code, class, retry-after, task id; or answer,
//!   polls, attempts, times) equal what the independent [`oracle`] predicts from the tables
//!   (with a model: from its first wait and the gap the solve keeps in its snapshot, which must
//!   lie within the documented bounds);
//! - the key appears only in request bodies: never in a URL, a snapshot, a failure (code,
//!   message, task id), a solution, or (for every `debug_every`-th solve) any output's `Debug`;
//! - with a snapshot/restore inserted at a random step (before a send, or while a request is
//!   out) for a `restore_rate` share of solves, the solve still matches the oracle exactly, the
//!   restored solve's snapshot equals the one it came from, and it asks for the same request;
//! - terminal outputs are sticky, and the driver never gets a `Misuse` error.
//!
//! A violation names the run's seed and the solve's index; `--seed S --only I` replays that one
//! solve with a trace.

pub mod models;
pub mod oracle;
pub mod rng;
pub mod upstream;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write;

use captchaai_engine::{ApiKey, Body, Config, HttpRequest, Output, RequestKind, Solve, SolveTimes, Task};

use crate::models::Models;
use crate::oracle::{Gap, Outcome, Prediction, TYPES, TypeRow, Waits};
use crate::rng::{Rng, mix};
use crate::upstream::{Condition, Delivery, Faults, Upstream, render};

/// Virtual time of the first solve (epoch ms, 2023-11-14).
pub const EPOCH: u64 = 1_700_000_000_000;

/// Run options.
#[derive(Clone, Debug)]
pub struct Options {
    pub solves: u64,
    /// Probability that a reply is faulty, and that a solve has a fault condition.
    pub fault_rate: f64,
    pub seed: u64,
    /// Virtual time between solve creations (sets how many are in flight at once).
    pub arrival_gap_ms: u64,
    /// Share of solves with a snapshot/restore at a random step.
    pub restore_rate: f64,
    /// Share of solves created with a learned solve-times model.
    pub model_rate: f64,
    /// Share of solves whose host stalls once (0 by default: the benchmarked run has none).
    pub stall_rate: f64,
    /// Every n-th solve also has each output's `Debug` searched for the key (0: none).
    pub debug_every: u64,
    /// Run only this solve, with a trace on stderr.
    pub only: Option<u64>,
    /// Stop after this many violations.
    pub max_violations: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            solves: 20_000,
            fault_rate: 0.3,
            seed: 1,
            arrival_gap_ms: 40,
            restore_rate: 0.25,
            model_rate: 0.35,
            stall_rate: 0.0,
            debug_every: 16,
            only: None,
            max_violations: 20,
        }
    }
}

/// A check that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub seed: u64,
    pub solve: u64,
    pub what: String,
    /// The run's options a replay needs besides the seed (` --stall-rate P`, or empty).
    pub flags: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed={} solve={}: {} (replay: cargo run --release -p sim -- --seed {}{} --only {})",
            self.seed, self.solve, self.what, self.seed, self.flags, self.solve
        )
    }
}

impl Options {
    fn violation(&self, solve: u64, what: String) -> Violation {
        let flags = if self.stall_rate > 0.0 { format!(" --stall-rate {}", self.stall_rate) } else { String::new() };
        Violation { seed: self.seed, solve, what, flags }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub solves: u64,
    pub solved: u64,
    pub failed: u64,
    /// Failures by code, sorted by count when reported.
    pub codes: Vec<(String, u64)>,
    /// Solves per upstream condition, by [`condition_name`].
    pub conditions: Vec<(&'static str, u64)>,
    pub sends: u64,
    pub restores: u64,
    /// Restores taken while a request was out.
    pub restores_in_flight: u64,
    pub debug_checked: u64,
    /// Solves created with a model; of them, those whose model gives a first wait, those with a
    /// learned gap, and those where a poll waited a gap out.
    pub with_model: u64,
    pub learned_first_waits: u64,
    pub learned_gaps: u64,
    pub gaps_taken: u64,
    pub faults: Faults,
    pub peak_in_flight: usize,
    /// Virtual time the run covered.
    pub virtual_ms: u64,
    /// The latest any solve whose host never stalled ended relative to its deadline (ms; <= its
    /// request timeout).
    pub max_past_deadline_ms: i64,
    /// Solves whose host stalled; of them, those that sent a last poll after the deadline, and
    /// those it solved.
    pub stalled: u64,
    pub last_polls: u64,
    pub last_poll_saves: u64,
    pub violations: Vec<Violation>,
}

impl Report {
    fn count(list: &mut Vec<(String, u64)>, code: &str) {
        match list.iter_mut().find(|(c, _)| c == code) {
            Some((_, n)) => *n += 1,
            None => list.push((code.to_owned(), 1)),
        }
    }
}

/// The name of a condition, for reports.
pub fn condition_name(condition: &Condition) -> &'static str {
    match condition {
        Condition::Normal => "normal",
        Condition::Busy { .. } => "busy threads",
        Condition::NoPlan { .. } => "no plan",
        Condition::Banned => "IP ban",
        Condition::Refused(_) => "permanent submit code",
        Condition::SilentQueue { .. } => "silent queueing",
        Condition::Unsolvable { .. } => "unsolvable",
        Condition::LostTask => "lost task",
        Condition::Throttled { .. } => "rate limited",
    }
}

/// Everything about solve `index` that follows from the seed alone.
pub struct Setup {
    pub index: u64,
    pub seed: u64,
    pub ty: &'static TypeRow,
    pub config: Config,
    pub key: String,
    pub start: u64,
    /// Which of the type's [`Models`] the solve is created with, if any.
    pub model: Option<usize>,
    /// Where its host stalls, if it does.
    pub stall: Option<oracle::Stall>,
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

impl Setup {
    pub fn new(run_seed: u64, index: u64, arrival_gap_ms: u64, model_rate: f64, stall_rate: f64) -> Setup {
        let seed = mix(run_seed ^ mix(index.wrapping_add(0x5EED)));
        let mut r = Rng::new(seed ^ 0xC0F1_6000);
        let ty = r.pick(TYPES);
        let mut config = Config {
            base_url: (*r.pick(&[
                "https://ocr.captchaai.com",
                "http://127.0.0.1:8099/",
                "https://gw.example.net/captchaai",
            ]))
            .into(),
            request_timeout_ms: *r.pick(&[5_000, 10_000, 30_000]),
            max_submit_retries: r.below(6) as u32,
            max_poll_errors: r.range(1, 10) as u32,
            unsolvable_retries: r.below(3) as u32,
            ..Config::default()
        };
        if r.chance(0.3) {
            config.deadline_ms = Some(*r.pick(&[30_000, 90_000, 180_000, 300_000]));
        }
        if r.chance(0.2) {
            config.poll_interval_ms = Some(r.range(5_000, 12_000));
        }
        if r.chance(0.1) {
            config.initial_wait_ms = Some(r.range(1_000, 20_000));
        }
        let key = String::from_utf8((0..32).map(|_| *r.pick(ALNUM)).collect()).unwrap_or_default();
        // Its own stream: the other draws, and so every solve without a model, stay as they were.
        let mut m = Rng::new(seed ^ 0x501E_7135);
        let model = m.chance(model_rate).then(|| m.below(models::SHAPES.len() as u64) as usize);
        // Its own stream too: short stalls (the request goes out late, before the deadline) and
        // long ones (past the deadline, some past the token's lifetime).
        let mut st = Rng::new(seed ^ 0x57A1_1ED0);
        let stall = st.chance(stall_rate).then(|| oracle::Stall {
            before_send: st.range(1, 3) as u32,
            ms: if st.chance(0.5) { st.range(1_000, 60_000) } else { st.range(100_000, 400_000) },
        });
        Setup { index, seed, ty, config, key, start: EPOCH + index * arrival_gap_ms, model, stall }
    }
}

/// Wake-ups in time order: `(at - EPOCH) << SLOT_BITS | slot` in one min-heap of `u64`s (half
/// the size of an `(at, slot)` pair, one comparison per step: -1.6k instructions per simulated
/// solve against `BinaryHeap<Reverse<(u64, u32)>>`, measured with callgrind).
#[derive(Default)]
struct Agenda(BinaryHeap<Reverse<u64>>);

/// Slots are below `1 << SLOT_BITS`; virtual time gets the other 40 bits (35 years of ms).
const SLOT_BITS: u32 = 24;

impl Agenda {
    fn push(&mut self, at: u64, slot: u32) {
        self.0.push(Reverse((at - EPOCH) << SLOT_BITS | u64::from(slot)));
    }

    fn next_at(&self) -> Option<u64> {
        self.0.peek().map(|Reverse(e)| EPOCH + (e >> SLOT_BITS))
    }

    fn pop(&mut self) -> Option<(u64, u32)> {
        let Reverse(e) = self.0.pop()?;
        Some((EPOCH + (e >> SLOT_BITS), (e & ((1 << SLOT_BITS) - 1)) as u32))
    }
}

enum Pending {
    /// Send this request at its `at`.
    Wake(HttpRequest),
    /// The host wakes from its stall: it asks the solve for its output again.
    Stalled,
    /// The reply (or transport error) to request `id` arrives.
    Arrive { id: u32, delivery: Delivery },
}

struct Slot {
    index: u64,
    solve: Solve,
    key: String,
    upstream: Upstream,
    expected: Prediction,
    submit_url: String,
    res_url: String,
    start: u64,
    deadline: u64,
    timeout: u64,
    /// The end of the last-poll window (the submit plus the type's token lifetime, when that is
    /// after the deadline).
    window_end: Option<u64>,
    /// The later of the deadline and the window's end, plus one request timeout.
    ends_by: u64,
    /// The stall still to come, and when the host woke from it.
    stall: Option<oracle::Stall>,
    woke: Option<u64>,
    /// Requests sent at or after the deadline.
    late_sends: u32,
    pending: Pending,
    step: u32,
    /// Snapshot/restore before this step (0: never).
    restore_at: u32,
    sends: u32,
    fingerprint: u64,
    debug: bool,
    trace: bool,
}

/// Runs a simulation.
pub fn run(options: &Options) -> Report {
    Sim::new(options).run()
}

struct Sim<'a> {
    o: &'a Options,
    report: Report,
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    agenda: Agenda,
    /// Reused for the `Debug` key checks.
    debug_text: String,
    in_flight: usize,
    models: Models,
}

impl<'a> Sim<'a> {
    fn new(o: &'a Options) -> Sim<'a> {
        let report = Report {
            conditions: [
                "normal",
                "busy threads",
                "no plan",
                "IP ban",
                "permanent submit code",
                "silent queueing",
                "unsolvable",
                "lost task",
                "rate limited",
            ]
            .into_iter()
            .map(|n| (n, 0))
            .collect(),
            ..Report::default()
        };
        Sim {
            o,
            report,
            slots: Vec::new(),
            free: Vec::new(),
            agenda: Agenda::default(),
            debug_text: String::new(),
            in_flight: 0,
            models: Models::new(),
        }
    }

    fn run(mut self) -> Report {
        let (mut next, end) = match self.o.only {
            Some(i) => (i, i + 1),
            None => (0, self.o.solves),
        };
        let mut now = 0;
        loop {
            if self.report.violations.len() >= self.o.max_violations {
                break;
            }
            let next_start = (next < end).then(|| EPOCH + next * self.o.arrival_gap_ms);
            let next_event = self.agenda.next_at();
            match (next_start, next_event) {
                (Some(s), e) if e.is_none_or(|e| s <= e) => {
                    now = s;
                    self.start(next);
                    next += 1;
                }
                (_, Some(_)) => {
                    let (t, slot) = self.agenda.pop().unwrap_or_default();
                    now = t;
                    self.event(t, slot);
                }
                (_, None) => break,
            }
        }
        self.report.virtual_ms = now.saturating_sub(EPOCH);
        self.report.codes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        self.report
    }

    fn violation(&mut self, slot: u32, what: String) {
        let s = self.slots[slot as usize].take().expect("slot");
        self.free.push(slot);
        self.in_flight -= 1;
        let v = self.o.violation(s.index, what);
        eprintln!("sim violation: {v}");
        self.report.violations.push(v);
    }

    fn start(&mut self, index: u64) {
        let setup = Setup::new(self.o.seed, index, self.o.arrival_gap_ms, self.o.model_rate, self.o.stall_rate);
        let trace = self.o.only.is_some();
        let model = setup.model.map(|shape| self.models.get(setup.ty, shape));
        // The first wait the model gives this solve (an exploring one for a few creation times).
        let learned_first_wait =
            model.and_then(|model| model.schedule(&setup.config, setup.start)).map(|(this, _)| this.first_wait_ms);
        if self.free.is_empty() && self.slots.len() >= 1 << SLOT_BITS {
            let what = format!("over 2^{SLOT_BITS} solves in flight: raise --arrival-gap-ms");
            self.report.violations.push(self.o.violation(index, what));
            return;
        }
        self.report.solves += 1;
        let (solve, waits) = match create(&setup, model, learned_first_wait) {
            Ok(created) => created,
            Err(what) => {
                eprintln!("sim violation: solve {index}: {what}");
                self.report.violations.push(self.o.violation(index, what));
                return;
            }
        };
        if model.is_some() {
            self.report.with_model += 1;
            self.report.learned_first_waits += u64::from(learned_first_wait.is_some());
            self.report.learned_gaps += u64::from(waits.gap.is_some());
        }
        let fault_rate = self.o.fault_rate;
        let mut oracle_upstream = Upstream::new(setup.seed, fault_rate, setup.start);
        let expected = oracle::predict(setup.ty, &setup.config, &waits, setup.start, setup.stall, &mut oracle_upstream);
        self.report.gaps_taken += u64::from(expected.gap_taken);
        let upstream = Upstream::new(setup.seed, fault_rate, setup.start);
        let name = condition_name(&upstream.condition);
        if let Some(c) = self.report.conditions.iter_mut().find(|(n, _)| *n == name) {
            c.1 += 1;
        }
        if trace {
            eprintln!(
                "solve {index}: {} at {} with {:?}, condition {:?}\n  model {:?}: {}\n  waits: first {} ms, interval {} ms, gap {:?}\n  oracle: {:?}",
                setup.ty.name,
                setup.start,
                setup.config,
                upstream.condition,
                setup.model,
                model.map(SolveTimes::to_string).unwrap_or_default(),
                waits.first_wait_ms,
                waits.poll_interval_ms,
                waits.gap,
                expected
            );
        }
        let base = setup.config.base_url.trim_end_matches('/');
        let mut r = Rng::new(setup.seed ^ 0x7E57);
        let restore_at =
            if r.chance(self.o.restore_rate) { 1 + r.below(u64::from(expected.sends) * 2) as u32 } else { 0 };
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            (self.slots.len() - 1) as u32
        });
        self.in_flight += 1;
        self.report.peak_in_flight = self.report.peak_in_flight.max(self.in_flight);
        let deadline = setup.start + waits.deadline_ms;
        let window_end = oracle::window_end(setup.ty, setup.start, deadline);
        let ends_by = window_end.unwrap_or(deadline).max(deadline) + setup.config.request_timeout_ms;
        self.report.stalled += u64::from(setup.stall.is_some());
        self.slots[slot as usize] = Some(Slot {
            index,
            solve,
            key: setup.key,
            upstream,
            expected,
            submit_url: [base, "/in.php"].concat(),
            res_url: [base, "/res.php"].concat(),
            start: setup.start,
            deadline,
            timeout: setup.config.request_timeout_ms,
            window_end,
            ends_by,
            stall: setup.stall,
            woke: None,
            late_sends: 0,
            pending: Pending::Arrive { id: 0, delivery: placeholder() },
            step: 0,
            restore_at,
            sends: 0,
            fingerprint: 0,
            debug: self.o.debug_every > 0 && index.is_multiple_of(self.o.debug_every),
            trace,
        });
        let s = self.slots[slot as usize].as_mut().expect("slot");
        if s.solve.deadline() != Some(deadline) || s.solve.ends_by() != Some(ends_by) {
            let what = format!(
                "engine deadline {:?}, ends by {:?} != table deadline {deadline}, ends by {ends_by} (window {:?}, \
                 timeout {})",
                s.solve.deadline(),
                s.solve.ends_by(),
                s.window_end,
                s.timeout
            );
            return self.violation(slot, what);
        }
        let output = s.solve.poll_output(setup.start);
        self.after_output(slot, setup.start, output, false);
    }

    /// Acts on an output produced at `now` (`late`: asked again by a host that woke from a
    /// stall, so a request due earlier is sent now).
    fn after_output(&mut self, slot: u32, now: u64, output: Result<Output, captchaai_engine::Misuse>, late: bool) {
        let s = self.slots[slot as usize].as_mut().expect("slot");
        let output = match output {
            Ok(output) => output,
            Err(misuse) => return self.violation(slot, format!("misuse at {now}: {misuse}")),
        };
        if s.trace {
            eprintln!("  {now}: {output:?}");
        }
        if s.debug {
            self.report.debug_checked += 1;
            // One buffer for every check: formatting, not allocating, is what is measured here.
            self.debug_text.clear();
            write!(self.debug_text, "{output:?}").ok();
            if s.has_key(&self.debug_text) {
                return self.violation(slot, "the key is in an output's Debug".into());
            }
        }
        match output {
            Output::Send(request) => {
                if let Err(what) = check_request(s, now, &request, late) {
                    return self.violation(slot, what);
                }
                let at = request.at.max(now);
                s.pending = Pending::Wake(request);
                self.agenda.push(at, slot);
            }
            terminal => self.finish(slot, now, terminal),
        }
    }

    fn event(&mut self, now: u64, slot: u32) {
        let s = self.slots[slot as usize].as_mut().expect("slot");
        s.step += 1;
        if s.step == s.restore_at {
            let in_flight = matches!(s.pending, Pending::Arrive { .. });
            if let Err(what) = restore(s, now) {
                return self.violation(slot, what);
            }
            self.report.restores += 1;
            self.report.restores_in_flight += u64::from(in_flight);
        }
        match std::mem::replace(&mut s.pending, Pending::Arrive { id: 0, delivery: placeholder() }) {
            Pending::Wake(request) if s.stall.is_some_and(|stall| stall.before_send == s.sends) => {
                // The host stalls before sending: it sleeps, then asks again.
                let stall = s.stall.take().map_or(0, |stall| stall.ms);
                if s.trace {
                    eprintln!("  {now}: the host stalls for {stall} ms before sending request {}", request.id);
                }
                s.pending = Pending::Stalled;
                self.agenda.push(now + stall, slot);
            }
            Pending::Stalled => {
                s.woke = Some(now);
                let output = s.solve.poll_output(now);
                self.after_output(slot, now, output, true);
            }
            Pending::Wake(request) => {
                s.sends += 1;
                if request.at >= s.deadline {
                    s.late_sends += 1;
                    self.report.last_polls += 1;
                }
                self.report.sends += 1;
                s.fingerprint = oracle::fold(s.fingerprint, request.kind, request.at);
                let task_id = match request.kind {
                    RequestKind::Poll => poll_id(&request),
                    _ => None,
                };
                let delivery = s.upstream.respond(request.kind, now, task_id, request.timeout_ms);
                if s.trace {
                    eprintln!("  {now}: upstream {delivery:?}");
                }
                s.pending = Pending::Arrive { id: request.id, delivery };
                let at = match &s.pending {
                    Pending::Arrive { delivery, .. } => now + delivery.after_ms,
                    Pending::Wake(_) | Pending::Stalled => now,
                };
                self.agenda.push(at, slot);
            }
            Pending::Arrive { id, delivery } => {
                let output = match oracle::transport_of(&delivery.meaning) {
                    Some(error) => s.solve.handle_transport_error(now, id, error),
                    None => {
                        let (status, body) =
                            render(&delivery.meaning, delivery.variant, &s.key, &mut s.upstream.faults);
                        if s.trace {
                            eprintln!("  {now}: reply {status} {body:?}");
                        }
                        s.solve.handle_response(now, id, status, body.as_bytes())
                    }
                };
                self.after_output(slot, now, output, false);
            }
        }
    }

    fn finish(&mut self, slot: u32, now: u64, terminal: Output) {
        let s = self.slots[slot as usize].as_mut().expect("slot");
        if s.solve.poll_output(now + 1_000).as_ref() != Ok(&terminal) {
            return self.violation(slot, "terminal output is not sticky".into());
        }
        let past = now as i64 - s.deadline as i64;
        let bound = match s.woke {
            None => s.deadline + s.timeout,
            Some(woke) => s.ends_by.max(woke),
        };
        if now > bound {
            let what = format!("ended {past} ms past the deadline (bound: {bound}, woke {:?})", s.woke);
            return self.violation(slot, what);
        }
        if s.late_sends > 1 {
            let what = format!("{} requests sent after the deadline", s.late_sends);
            return self.violation(slot, what);
        }
        if let Err(what) = check_terminal(s, now, &terminal) {
            return self.violation(slot, what);
        }
        if s.woke.is_none() {
            self.report.max_past_deadline_ms = self.report.max_past_deadline_ms.max(past);
        }
        match &terminal {
            Output::Solved(_) => {
                self.report.solved += 1;
                self.report.last_poll_saves += u64::from(s.late_sends > 0);
            }
            Output::Failed(f) => {
                self.report.failed += 1;
                Report::count(&mut self.report.codes, &f.code);
            }
            Output::Send(_) => {}
        }
        let s = self.slots[slot as usize].take().expect("slot");
        self.report.faults.add(&s.upstream.faults);
        self.free.push(slot);
        self.in_flight -= 1;
    }
}

impl Slot {
    fn has_key(&self, text: &str) -> bool {
        contains(text, &self.key)
    }
}

/// Whether `text` holds `needle`: `memchr` for its first byte, then a compare. Keys are 32
/// random letters and digits, so candidates are rare; building a `memmem` finder per solve cost
/// ~1.2k instructions, more than all of a solve's key checks done this way.
fn contains(text: &str, needle: &str) -> bool {
    let (text, needle) = (text.as_bytes(), needle.as_bytes());
    let Some((&first, rest)) = needle.split_first() else { return true };
    memchr::memchr_iter(first, text).any(|i| text[i + 1..].starts_with(rest))
}

fn placeholder() -> Delivery {
    Delivery { after_ms: 0, meaning: upstream::Meaning::Timeout, variant: 0 }
}

/// Creates the solve of `setup` (with `model`, if given) and the waits the oracle predicts it
/// with: the tables', or the model's first wait (`learned_first_wait`) and the gap the new
/// solve's snapshot keeps (`second_wait_ms`, `gap_after_polls`: absent means one poll), checked
/// against the bounds.
fn create(
    setup: &Setup,
    model: Option<&SolveTimes>,
    learned_first_wait: Option<u64>,
) -> Result<(Solve, Waits), String> {
    let Some(model) = model else {
        let solve = Solve::from_json(setup.ty.task_json, &setup.key, &setup.config, setup.start)
            .map_err(|failure| format!("create failed: {failure}"))?;
        return Ok((solve, Waits::of(setup.ty, &setup.config)));
    };
    let task = Task::from_json(setup.ty.task_json).map_err(|failure| format!("task refused: {failure}"))?;
    let key = ApiKey::new(&setup.key).map_err(|failure| format!("key refused: {failure}"))?;
    let solve = Solve::with_solve_times(task, key, &setup.config, model, setup.start)
        .map_err(|e| format!("create with a model failed: {e}"))?;
    let snapshot = solve.snapshot();
    let gap = snapshot_number(&snapshot, r#""second_wait_ms":"#).map(|wait_ms| Gap {
        after_polls: snapshot_number(&snapshot, r#""gap_after_polls":"#).map_or(1, |n| n as u32),
        wait_ms,
    });
    let waits = Waits::learned(setup.ty, &setup.config, learned_first_wait, gap)?;
    Ok((solve, waits))
}

/// The number after `field` (`"name":`) in a snapshot. Parsing the snapshot with `serde_json`
/// instead: 64.1k -> 74.3k instructions per simulated solve (callgrind), for the same run.
fn snapshot_number(snapshot: &str, field: &str) -> Option<u64> {
    let at = snapshot.find(field)? + field.len();
    let digits = snapshot[at..].bytes().take_while(u8::is_ascii_digit).count();
    snapshot[at..at + digits].parse().ok()
}

/// The task id in a poll body (`key=<32>&action=get&id=<id>&json=1`, as `check_request`
/// checked).
fn poll_id(request: &HttpRequest) -> Option<&str> {
    let Body::Form(body) = &request.body else { return None };
    let rest = body.get(POLL_ID_AT..)?;
    Some(&rest[..memchr::memchr(b'&', rest.as_bytes()).unwrap_or(rest.len())])
}

/// Where the task id starts in a poll body.
const POLL_ID_AT: usize = "key=".len() + 32 + "&action=get&id=".len();

fn check_request(s: &Slot, now: u64, request: &HttpRequest, late: bool) -> Result<(), String> {
    // At or after the deadline only the last poll, asked for by a host that woke from a stall:
    // due when asked, before the window ends.
    let last_poll = late
        && request.kind == RequestKind::Poll
        && request.at == now
        && s.window_end.is_some_and(|end| request.at < end);
    if request.at >= s.deadline && !last_poll {
        return Err(format!("request {} due at {} is at or after the deadline {}", request.id, request.at, s.deadline));
    }
    if request.at < now && !late {
        return Err(format!("request {} due at {} was handed out later, at {now}", request.id, request.at));
    }
    // The expected URLs are made from the base URL alone, so an equal URL holds no key.
    let url = if request.kind == RequestKind::Submit { &s.submit_url } else { &s.res_url };
    if *request.url != **url {
        if s.has_key(&request.url) {
            return Err("the key is in a URL".into());
        }
        return Err(format!("{} request to {} (expected {url})", request.kind.as_str(), request.url));
    }
    let Body::Form(body) = &request.body else { return Err("a multipart body for a form task".into()) };
    if !body.starts_with("key=") || body.get(4..36) != Some(s.key.as_str()) {
        return Err("the request body does not start with the key".into());
    }
    // Right after the key, in the documented wire order (`Task::params`).
    let after_key = &body[36..];
    let action = match request.kind {
        RequestKind::Poll => after_key.starts_with("&action=get&id="),
        RequestKind::ThreadsInfo => after_key.starts_with("&action=threadsinfo"),
        RequestKind::Submit => after_key.starts_with("&method="),
        _ => false,
    };
    if !action {
        return Err(format!("a {} request without its action", request.kind.as_str()));
    }
    if request.timeout_ms != s.timeout {
        return Err(format!("timeout {} != config {}", request.timeout_ms, s.timeout));
    }
    Ok(())
}

/// Snapshot, restore, and check that nothing changed.
fn restore(s: &mut Slot, now: u64) -> Result<(), String> {
    let snapshot = s.solve.snapshot();
    if s.has_key(&snapshot) {
        return Err("the key is in a snapshot".into());
    }
    let restored = Solve::restore(&snapshot, &s.key).map_err(|e| format!("restore failed: {e}"))?;
    if restored.snapshot() != snapshot {
        return Err("the restored solve's snapshot differs".into());
    }
    s.solve = restored;
    if s.trace {
        eprintln!("  {now}: snapshot/restore ({} bytes)", snapshot.len());
    }
    if let Pending::Wake(request) = &s.pending {
        // Before sending: the restored solve asks for the very same request.
        match s.solve.poll_output(now) {
            Ok(Output::Send(again)) if &again == request => {}
            other => return Err(format!("after restore, poll_output gave {other:?} instead of {request:?}")),
        }
    }
    Ok(())
}

/// The outcome against the oracle, and the key nowhere in it.
fn check_terminal(s: &Slot, now: u64, terminal: &Output) -> Result<(), String> {
    let e = &s.expected;
    if (s.sends, s.fingerprint, now) != (e.sends, e.fingerprint, e.ended_at) {
        return Err(format!(
            "requests differ from the oracle: {} sends ending at {now}, oracle {} sends ending at {} ({})",
            s.sends,
            e.sends,
            e.ended_at,
            if s.fingerprint == e.fingerprint { "same kinds and times so far" } else { "different kinds or times" }
        ));
    }
    match (terminal, &e.outcome) {
        (
            Output::Solved(sol),
            Outcome::Solved { answer, task_id, submitted_at, solved_at, polls, attempts, expires_at },
        ) => {
            let got = (
                sol.answer.as_str(),
                sol.task_id.as_deref(),
                sol.submitted_at,
                sol.solved_at,
                sol.polls,
                sol.attempts,
                sol.expires_at,
            );
            let want =
                (answer.as_str(), Some(task_id.as_str()), *submitted_at, *solved_at, *polls, *attempts, *expires_at);
            if got != want || sol.user_agent.is_some() || sol.elapsed_ms != solved_at - s.start {
                return Err(format!("solved as {sol:?}, oracle: {:?}", e.outcome));
            }
            if s.has_key(sol.answer.as_str()) {
                return Err("the key is in a solution".into());
            }
        }
        (Output::Failed(f), Outcome::Failed(want)) => {
            let got = (f.code.as_str(), f.class, f.retry_after_ms, f.task_id.as_deref());
            if got != (want.code.as_str(), want.class, want.retry_after_ms, want.task_id.as_deref())
                || f.field.is_some()
            {
                return Err(format!("failed as {f:?}, oracle: {want:?}"));
            }
            if s.has_key(&f.message) || s.has_key(&f.code) || s.has_key(&f.to_string()) {
                return Err(format!("the key is in a failure ({})", f.code));
            }
            if f.message.is_empty() {
                return Err("a failure without a message".into());
            }
        }
        (got, want) => return Err(format!("outcome {got:?}, oracle: {want:?}")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::contains;

    #[test]
    fn the_key_is_found_wherever_it_stands_and_only_whole() {
        let key = "Ab3dEf7hIj9kLm0nOp2qRs4tUv6wXy8z";
        for text in [key.to_owned(), format!("key={key}&json=1"), format!("AAA{key}"), format!("A{}{key}", &key[..31])]
        {
            assert!(contains(&text, key), "{text}");
        }
        for text in ["", "Ab3", &key[..31], &key[1..], "key=Ab3dEf7hIj9kLm0nOp2qRs4tUv6wXy8Z"] {
            assert!(!contains(text, key), "{text}");
        }
    }
}
