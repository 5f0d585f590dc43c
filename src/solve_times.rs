//! A learned model of one captcha type's ready times, and the poll schedule it gives: the data
//! half of adaptive polling (the rule's constants and its description are
//! [`crate::registry::ADAPTIVE`], beside the type table; the schedules and their costs are
//! [`crate::schedule`]).
//!
//! Plain data and pure arithmetic on integers: no clock, no randomness, no key or token (only
//! the type's name, counts and times). Hosts [`SolveTimes::observe`] finished solves and create
//! solves with [`crate::Solve::with_solve_times`]; the text form ([`SolveTimes`]'s `Display`
//! and `FromStr`) is versioned JSON of a few hundred bytes.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use thiserror::Error;

use crate::config::{DEFAULT_POLL_COST_MS, INITIAL_WAIT_MS, POLL_COST_MS};
use crate::outcome::Solution;
use crate::registry::{self, ADAPTIVE, TypeSpec};
use crate::schedule::{self, Plan, Schedule};
use crate::text;

/// Identifies the text form.
const FORMAT: &str = "captchaai-engine/solve-times";
/// The text form's version this engine writes. It also reads version 3 (the drift test's edges
/// not known), version 2 (no drift: both sums zero) and version 1 (see [`from_v1`]).
const VERSION: u64 = 4;
/// The weight one observation adds.
const UNIT: u32 = 1_024;
/// The estimate's total mass: `2^32` stands for certainty.
const ONE_SHIFT: u32 = 32;
/// The EM round's fixed point: an interval's share over the estimate within it, times `2^20`
/// (at most `2^52` each, under `2^58` summed over 56; times the estimate, under `2^53`).
const RATE_SHIFT: u32 = 20;
/// The drift test's fixed point: `2^16` stands for a probability of one.
const HALF: i64 = 1 << 15;

/// Why a model's text form was refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SolveTimesError {
    /// The text is not JSON.
    #[error("solve times are not valid JSON: {0}")]
    Malformed(String),
    /// Valid JSON, but not a model of this engine.
    #[error("not a captchaai-engine solve-times model")]
    Foreign,
    /// A model of another version.
    #[error("solve-times version {0} is not supported (this engine reads versions 1 to {VERSION})")]
    UnsupportedVersion(u64),
    /// Our format, but the content is out of range, or the type is unknown.
    #[error("solve times are invalid: {0}")]
    Invalid(String),
}

/// One remembered observation: the answer was ready within seconds `from..to` after the submit
/// (after `from` s, by `to` s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Seen {
    from: u32,
    to: u32,
    weight: u32,
}

/// What one captcha type's finished solves took, and the poll schedule it gives a new solve of
/// that type: the one of least expected cost, `c` per poll plus the wait from the answer being
/// ready to the poll that finds it, with `c` the config's `poll_cost_ms`. It remembers when
/// each answer was ready as the interval its polls allow (decayed: it weighs about the last 80
/// observations, and keeps little of them when a drift test finds the answers have moved) and
/// estimates the distribution from those intervals; a few solves explore an earlier first poll,
/// so that it learns what comes before it. Under
/// [`SolveTimes::min_observations`] it gives nothing: the type's table applies unchanged. Never
/// a first poll under 1 s, polls closer than the type's 5 s interval, or a poll past the
/// deadline; the rule, with its constants, is documented beside the type table (`ADAPTIVE` in
/// `registry.rs`).
#[derive(Clone)]
pub struct SolveTimes {
    spec: &'static TypeSpec,
    /// Observations so far (saturating).
    observations: u32,
    /// The remembered intervals, in order, at most one per interval.
    seen: Vec<Seen>,
    /// Derived from `seen`: the estimated mass ready in each second below the deadline (summing
    /// to about `2^32`), or empty with nothing remembered.
    mass: Vec<u64>,
    /// Derived: the plan for the poll cost last asked for.
    plan: Cell<Option<(u64, Option<Plan>)>>,
    /// The poll cost of the last solve created with the model (the default before any): the
    /// schedules [`SolveTimes::observe`] reads solutions back with. Kept in the text form.
    poll_cost_ms: Cell<u64>,
    /// The drift test's two sums (answers earlier, later than the estimate says).
    drift: Drift,
}

/// The drift test's state: a two-sided CUSUM of where observations fall in the estimate's
/// distribution, in `2^16` of a probability (each sum stays at most `drift_limit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Drift {
    /// Answers earlier than the estimate says; its edge is the latest end among them.
    earlier: Side,
    /// Answers later than the estimate says; its edge is the earliest start among them.
    later: Side,
}

/// One sum of the drift test, and the edge of the observations it gathered since it was last
/// zero: how far towards the old estimate they reach. `None` while the sum is zero, or when not
/// known (a version 3 model's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Side {
    sum: u32,
    edge: Option<u32>,
}

impl Side {
    /// The sum after an observation that adds `by` (its distance from the middle, less its
    /// allowance), whose own edge is `edge` (`nearer` picks the one of two edges nearer the old
    /// estimate).
    fn step(self, by: i64, edge: u32, nearer: fn(u32, u32) -> u32) -> Side {
        let sum = (i64::from(self.sum) + by).max(0) as u32;
        let edge = if self.sum == 0 { Some(edge) } else { self.edge.map(|old| nearer(old, edge)) };
        Side { sum, edge: edge.filter(|_| sum > 0) }
    }

    /// `sum` or `sum/edge`.
    fn write(self, text: &mut String) {
        text.push_str(itoa::Buffer::new().format(self.sum));
        if let Some(edge) = self.edge {
            text.push('/');
            text.push_str(itoa::Buffer::new().format(edge));
        }
    }

    /// Reads [`Side::write`]'s form: `None` when malformed, over the limit or the horizon, or
    /// with an edge and no sum.
    fn parse(text: &str, horizon: u32) -> Option<Side> {
        let (sum, edge) = match text.split_once('/') {
            Some((sum, edge)) => (sum, Some(edge.parse().ok()?)),
            None => (text, None),
        };
        let side = Side { sum: sum.parse().ok()?, edge };
        let edge_ok = side.edge.is_none_or(|edge| side.sum > 0 && edge <= horizon);
        (side.sum <= ADAPTIVE.drift_limit && edge_ok).then_some(side)
    }
}

impl Drift {
    /// `earlier:later`, each side `sum` or `sum/edge`; nothing when both sums are zero.
    fn to_text(self) -> String {
        let mut text = String::new();
        if self != Drift::default() {
            self.earlier.write(&mut text);
            text.push(':');
            self.later.write(&mut text);
        }
        text
    }

    /// Reads [`Drift::to_text`]'s form: `None` when malformed (see [`Side::parse`]).
    fn parse(text: &str, horizon: u32) -> Option<Drift> {
        let (earlier, later) = text.split_once(':')?;
        Some(Drift { earlier: Side::parse(earlier, horizon)?, later: Side::parse(later, horizon)? })
    }
}

/// How the drift test fired: answers came earlier or later than the estimate said, and how far
/// towards it they reached (the side's edge).
#[derive(Clone, Copy, Debug)]
enum Drifted {
    Earlier(Option<u32>),
    Later(Option<u32>),
}

impl Drifted {
    /// Whether a remembered interval lies wholly beyond every answer the test gathered (after
    /// the latest end of answers that came earlier, before the earliest start of answers that
    /// came later): the service as it was. Not known: none.
    fn stale(self, seen: &Seen) -> bool {
        match self {
            Drifted::Earlier(Some(latest_end)) => seen.from >= latest_end,
            Drifted::Later(Some(earliest_start)) => seen.to <= earliest_start,
            Drifted::Earlier(None) | Drifted::Later(None) => false,
        }
    }
}

impl PartialEq for SolveTimes {
    /// Models are equal when they remember the same: the rest is derived from it.
    fn eq(&self, other: &SolveTimes) -> bool {
        (self.spec.name, self.observations, &self.seen, self.poll_cost_ms.get(), self.drift)
            == (other.spec.name, other.observations, &other.seen, other.poll_cost_ms.get(), other.drift)
    }
}

impl Eq for SolveTimes {}

impl fmt::Debug for SolveTimes {
    /// What it remembers (the rest is derived from it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seen: Vec<_> = self.seen.iter().map(|seen| (seen.from, seen.to, seen.weight)).collect();
        f.debug_struct("SolveTimes")
            .field("type", &self.spec.name)
            .field("observations", &self.observations)
            .field("seen", &seen)
            .field("poll_cost_ms", &self.poll_cost_ms.get())
            .field("drift", &(self.drift.earlier, self.drift.later))
            .finish()
    }
}

impl SolveTimes {
    /// An empty model of a captcha type (its `type` in task JSON).
    pub fn new(task_type: &str) -> Result<SolveTimes, SolveTimesError> {
        let spec = registry::lookup(task_type)
            .ok_or_else(|| SolveTimesError::Invalid(format!("unknown captcha type `{task_type}`")))?;
        Ok(SolveTimes {
            spec,
            observations: 0,
            seen: Vec::new(),
            mass: Vec::new(),
            plan: Cell::new(None),
            poll_cost_ms: Cell::new(DEFAULT_POLL_COST_MS),
            drift: Drift::default(),
        })
    }

    /// Observations a model needs before it changes anything: under this many, solves created
    /// with it are exactly the type's table.
    pub const fn min_observations() -> u32 {
        ADAPTIVE.min_observations
    }

    /// The captcha type this model is of.
    pub fn task_type(&self) -> &'static str {
        self.spec.name
    }

    /// Observations so far.
    pub fn observations(&self) -> u32 {
        self.observations
    }

    /// Learns from a finished solve of this model's type, created with this model (it reads the
    /// solve's schedule back from its `submitted_at`, at the poll cost of the last solve created
    /// with the model: give a model's solves one poll cost). Returns
    /// whether it was used: only a solve of one attempt with at least one poll is (a resubmitted
    /// or synchronous solve's times say nothing about one task's ready time). Solves of another
    /// type must not be given: the solution does not name its type.
    pub fn observe(&mut self, solution: &Solution) -> bool {
        if solution.attempts != 1 || solution.polls == 0 {
            return false;
        }
        let n = solution.polls;
        let wait_before = if n == 1 {
            solution.elapsed_ms
        } else {
            // The schedule the solve most likely had: the one this model gives a solve created
            // when it was submitted, at the poll cost of the last solve created with it (only
            // asked for here: a plan is not made for a solve answered at its first poll).
            let interval = self.spec.poll_interval_ms;
            let schedule = self.schedule_at(self.poll_cost_ms.get(), solution.submitted_at);
            schedule.poll_ms(n, interval).saturating_sub(schedule.poll_ms(n - 1, interval))
        };
        let horizon = self.horizon();
        let to = u32::try_from(solution.elapsed_ms.div_ceil(1_000)).unwrap_or(u32::MAX).clamp(1, horizon);
        let from = u32::try_from(solution.elapsed_ms.saturating_sub(wait_before) / 1_000).unwrap_or(u32::MAX);
        let from = from.min(to - 1);
        let drifted = self.drifted(from, to);
        self.remember(from, to, drifted);
        self.observations = self.observations.saturating_add(1);
        self.estimate();
        true
    }

    /// The first wait this model gives a solve of its type at the default poll cost (before the
    /// deadline check a solve makes; a solve that explores polls earlier), or `None` under
    /// [`SolveTimes::min_observations`].
    pub fn first_wait_ms(&self) -> Option<u64> {
        self.plan(DEFAULT_POLL_COST_MS).map(|plan| plan.main.first_wait_ms)
    }

    /// The schedule this model gives a solve created at `now` with `config`, and the plan's own
    /// (they differ when the solve explores); `None` while the type's table applies (under
    /// [`SolveTimes::min_observations`], or when the config sets `initial_wait_ms`). What
    /// [`crate::Solve::with_solve_times`] uses, before it keeps the waits within the config's
    /// deadline and interval.
    pub fn schedule(&self, config: &crate::Config, now: u64) -> Option<(Schedule, Schedule)> {
        let plan = self.plan(config.poll_cost_ms).filter(|_| config.initial_wait_ms.is_none())?;
        Some((plan.for_solve(now), plan.main))
    }

    /// Notes the poll cost of a solve created with the model (what [`SolveTimes::observe`] reads
    /// solutions back with).
    pub(crate) fn created_with(&self, poll_cost_ms: u64) {
        self.poll_cost_ms.set(poll_cost_ms);
    }

    /// The `permille` quantile (0-1000) of the ready time as the model estimates it, as its
    /// second's lower edge in ms; `None` with nothing remembered.
    pub fn quantile_ms(&self, permille: u64) -> Option<u64> {
        let total: u64 = self.mass.iter().sum();
        if total == 0 {
            return None;
        }
        let target = u128::from(total) * u128::from(permille.min(1_000)) / 1_000;
        let mut seen = 0u128;
        let second = self
            .mass
            .iter()
            .position(|&mass| {
                seen += u128::from(mass);
                mass > 0 && seen > target
            })
            .or_else(|| self.mass.iter().rposition(|&mass| mass > 0))?;
        Some(second as u64 * 1_000)
    }

    /// The plan for a poll cost, or `None` under [`SolveTimes::min_observations`]. Kept for the
    /// last poll cost asked for (derived state only: the same model gives the same plan).
    pub(crate) fn plan(&self, poll_cost_ms: u64) -> Option<Plan> {
        if self.observations < ADAPTIVE.min_observations {
            return None;
        }
        if let Some((cost, plan)) = self.plan.get()
            && cost == poll_cost_ms
        {
            return plan;
        }
        let min_first_wait = INITIAL_WAIT_MS.min;
        let plan = schedule::plan(&self.mass, self.spec.poll_interval_ms, min_first_wait, poll_cost_ms);
        self.plan.set(Some((poll_cost_ms, plan)));
        plan
    }

    /// The schedule a solve created at `now` with poll cost `poll_cost_ms` gets: the plan's, or
    /// the table's while there is none.
    pub(crate) fn schedule_at(&self, poll_cost_ms: u64, now: u64) -> Schedule {
        match self.plan(poll_cost_ms) {
            Some(plan) => plan.for_solve(now),
            None => Schedule { first_wait_ms: self.spec.initial_wait_ms, gap: None },
        }
    }

    /// The type's deadline in whole seconds: the estimate's horizon.
    fn horizon(&self) -> u32 {
        u32::try_from(self.spec.deadline_ms / 1_000).unwrap_or(u32::MAX).clamp(2, schedule::MOST_SECONDS as u32)
    }

    /// The drift test, fed an observation of `from..to`: whether the ready times have moved
    /// away from the estimate, and which way. Where the estimate is right, the middle of an
    /// observation's interval in the estimate's distribution (the mean of its cumulative mass at
    /// both ends) averages one half, whatever the polls; each sum gathers how far observations
    /// fall below (above) that, less `drift_allowance` times the estimate's mass outside the
    /// interval, and the test fires when one passes `drift_limit`, both sums then starting
    /// again. Only a model in use is tested.
    fn drifted(&mut self, from: u32, to: u32) -> Option<Drifted> {
        let total: u64 = self.mass.iter().sum();
        if total == 0 || self.observations < ADAPTIVE.min_observations {
            return None;
        }
        let below = |second: u32| -> u64 { self.mass.iter().take(second as usize).sum() };
        let (below_from, below_to) = (below(from), below(to));
        // Under 2^49: the estimate's mass sums to about 2^32.
        let middle = ((below_from + below_to) * HALF as u64 / total) as i64;
        // The allowance is for the estimate's mass outside the interval: an observation that
        // spans all of it says nothing of where answers fall, so it neither counts nor drains
        // the sums (the wide intervals of a first poll after every answer would else drain what
        // the few exploring solves that poll earlier gather).
        let width = ((below_to - below_from) * 2 * HALF as u64 / total) as i64;
        let allowance = ADAPTIVE.drift_allowance * (2 * HALF - width) / (2 * HALF);
        let earlier = self.drift.earlier.step(HALF - middle - allowance, to, u32::max);
        let later = self.drift.later.step(middle - HALF - allowance, from, u32::min);
        let fired = if earlier.sum > ADAPTIVE.drift_limit {
            Some(Drifted::Earlier(earlier.edge))
        } else if later.sum > ADAPTIVE.drift_limit {
            Some(Drifted::Later(later.edge))
        } else {
            None
        };
        self.drift = if fired.is_some() { Drift::default() } else { Drift { earlier, later } };
        fired
    }

    /// Decays what is remembered and adds one observation of `from..to`. After the drift test
    /// fired, forgets the intervals it found stale and keeps `1/forget_on_drift` of the rest.
    fn remember(&mut self, from: u32, to: u32, drifted: Option<Drifted>) {
        for seen in &mut self.seen {
            seen.weight -= seen.weight / ADAPTIVE.memory;
            match drifted {
                Some(drifted) if drifted.stale(seen) => seen.weight = 0,
                Some(_) => seen.weight /= ADAPTIVE.forget_on_drift,
                None => {}
            }
        }
        self.seen.retain(|seen| seen.weight >= UNIT / 8);
        let new = Seen { from, to, weight: UNIT };
        match self.seen.binary_search_by(|seen| (seen.from, seen.to).cmp(&(from, to))) {
            Ok(at) => self.seen[at].weight = self.seen[at].weight.saturating_add(UNIT),
            Err(at) => self.seen.insert(at, new),
        }
        while self.seen.len() > ADAPTIVE.most_remembered {
            let lightest = (0..self.seen.len()).min_by_key(|&i| self.seen[i].weight).unwrap_or(0);
            self.seen.remove(lightest);
        }
    }

    /// Estimates the mass ready in each second from the remembered intervals by
    /// [`ADAPTIVE`]'s `em_rounds` rounds of the self-consistency (EM) algorithm for
    /// interval-censored data, smoothed: each round spreads `smoothing_permille` of every
    /// interval's share evenly over its seconds and the rest in proportion to the estimate
    /// within it. Each interval's share starts in Turnbull's innermost intervals inside it (a
    /// remembered start followed by a remembered end; every interval holds one), plus the
    /// smoothed part. The mass lives on segments, the stretches between consecutive remembered
    /// starts and ends, and is even within each; a round is linear in intervals and segments (an
    /// interval's rate is added at its first segment and taken off after its last, of a running
    /// sum).
    fn estimate(&mut self) {
        const MOST: usize = ADAPTIVE.most_remembered;
        const EDGES: usize = 2 * MOST;
        const WORDS: usize = schedule::MOST_SECONDS / 64 + 1;
        self.plan.set(None);
        self.mass.clear();
        let total: u64 = self.seen.iter().map(|seen| u64::from(seen.weight)).sum();
        if total == 0 {
            return;
        }
        // The edges: every remembered start and end, in order, once each, read off a bit per
        // second (every edge is at most the horizon). With `at`, a count of the bits below, a
        // model of 54 intervals estimates in 25.6k instructions against 35.4k with sorting and
        // binary searches (native, callgrind, `polling-bench count observe`).
        let n = self.seen.len();
        let mut bits = [0u64; WORDS];
        for seen in &self.seen {
            for second in [seen.from, seen.to] {
                bits[second as usize / 64] |= 1 << (second % 64);
            }
        }
        let (mut edges, mut count, mut before) = ([0u32; EDGES], 0, [0u32; WORDS]);
        for (word, (&set, before)) in bits.iter().zip(&mut before).enumerate() {
            *before = count as u32;
            let mut set = set;
            while set != 0 {
                edges[count] = word as u32 * 64 + set.trailing_zeros();
                count += 1;
                set &= set - 1;
            }
        }
        let edges = &edges[..count];
        let segments = count - 1;
        let length = |k: usize| u64::from(edges[k + 1] - edges[k]);
        // Each interval: its first segment, the one after its last, and its share of `2^32` in
        // two parts, the smoothed one and the rest. `at`: the edges before a second.
        let at = |second: u32| {
            let word = second as usize / 64;
            (before[word] + (bits[word] & ((1u64 << (second % 64)) - 1)).count_ones()) as usize
        };
        let (mut starts, mut ends) = ([false; EDGES], [false; EDGES]);
        let smoothing = ADAPTIVE.smoothing_permille;
        let mut intervals = [(0usize, 0usize, 0u64, 0u64); MOST];
        for (interval, seen) in intervals.iter_mut().zip(&self.seen) {
            let (first, after) = (at(seen.from), at(seen.to));
            (starts[first], ends[after]) = (true, true);
            let share = (u64::from(seen.weight) << ONE_SHIFT) / total;
            *interval = (first, after, share * smoothing / 1_000, share * (1_000 - smoothing) / 1_000);
        }
        let intervals = &intervals[..n];
        let innermost = |k: usize| starts[k] && ends[k + 1];
        let (mut seconds_before, mut innermost_before) = ([0u64; EDGES], [0u64; EDGES]);
        for k in 0..segments {
            seconds_before[k + 1] = seconds_before[k] + length(k);
            innermost_before[k + 1] = innermost_before[k] + if innermost(k) { length(k) } else { 0 };
        }
        // Per second of each segment: the smoothed part of every interval over it (the same each
        // round), and the rest of the shares over its innermost seconds (the first estimate).
        let (mut smooth, mut first) = ([0i64; EDGES], [0i64; EDGES]);
        for &(from, to, smoothed, rest) in intervals {
            let even = (smoothed / (seconds_before[to] - seconds_before[from])) as i64;
            (smooth[from], smooth[to]) = (smooth[from] + even, smooth[to] - even);
            let even = (rest / (innermost_before[to] - innermost_before[from]).max(1)) as i64;
            (first[from], first[to]) = (first[from] + even, first[to] - even);
        }
        let (mut mass, mut smoothed) = ([0u64; EDGES], [0u64; EDGES]);
        running(&smooth[..count], |k, per_second| smoothed[k] = per_second * length(k));
        running(&first[..count], |k, per_second| {
            mass[k] = smoothed[k] + if innermost(k) { per_second * length(k) } else { 0 };
        });
        let mut within = [0u64; EDGES];
        for _ in 0..ADAPTIVE.em_rounds {
            for k in 0..segments {
                within[k + 1] = within[k] + mass[k];
            }
            let mut delta = [0i64; EDGES];
            for &(from, to, _, rest) in intervals {
                // Nothing left within it (rounding) keeps it out of this round.
                if let Some(rate) = (rest << RATE_SHIFT).checked_div(within[to] - within[from]) {
                    delta[from] += rate as i64;
                    delta[to] -= rate as i64;
                }
            }
            running(&delta[..count], |k, rate| mass[k] = smoothed[k] + ((mass[k] * rate) >> RATE_SHIFT));
        }
        self.mass.resize(self.horizon() as usize, 0);
        for k in 0..segments {
            let per_second = mass[k] / length(k);
            self.mass[edges[k] as usize..edges[k + 1] as usize].fill(per_second);
        }
    }
}

/// Calls `f` with each index below the last and the running sum of `delta` up to it (a sum of
/// whole intervals, never negative).
fn running(delta: &[i64], mut f: impl FnMut(usize, u64)) {
    let mut sum = 0i64;
    for (j, d) in delta.iter().take(delta.len() - 1).enumerate() {
        sum += d;
        f(j, sum.max(0) as u64);
    }
}

/// The text form, as written (read by [`Fields`]).
#[derive(Serialize)]
struct Text<'a> {
    format: &'a str,
    version: u64,
    #[serde(rename = "type")]
    task_type: &'a str,
    n: u32,
    /// `from:to:weight,..` of the remembered intervals, in order.
    seen: &'a str,
    /// The poll cost of the last solve created with the model, when not the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    poll_cost_ms: Option<u64>,
    /// The drift test's sides, `earlier:later` (each `sum` or `sum/edge`), when not both zero.
    #[serde(skip_serializing_if = "str::is_empty")]
    drift: &'a str,
}

/// The fields of a text form's JSON object, read by name. By hand rather than by derived
/// `Deserialize` impls (one per version): the component was 7.7 KB smaller for it (515,284
/// bytes against 522,973, of a 512 KiB budget).
struct Fields<'a>(&'a serde_json::Map<String, serde_json::Value>);

impl<'a> Fields<'a> {
    /// The object's fields, where every name is one of `names`.
    fn of(value: &'a serde_json::Value, names: &[&str]) -> Result<Fields<'a>, SolveTimesError> {
        let object = value.as_object().ok_or(SolveTimesError::Foreign)?;
        match object.keys().find(|key| !names.contains(&key.as_str())) {
            Some(key) => Err(SolveTimesError::Invalid(format!("unknown field `{}`", text::clip(key, 40)))),
            None => Ok(Fields(object)),
        }
    }

    /// A field that must be there, read by `read`, which says what it must be.
    fn get<T>(
        &self,
        name: &str,
        read: impl Fn(&'a serde_json::Value) -> Option<T>,
        what: &str,
    ) -> Result<T, SolveTimesError> {
        self.0.get(name).and_then(read).ok_or_else(|| SolveTimesError::Invalid(format!("`{name}` must be {what}")))
    }

    /// A field that may be missing (`None`), else as [`Fields::get`] reads it.
    fn optional<T>(
        &self,
        name: &str,
        read: impl Fn(&'a serde_json::Value) -> Option<T>,
        what: &str,
    ) -> Result<Option<T>, SolveTimesError> {
        if self.0.contains_key(name) { self.get(name, read, what).map(Some) } else { Ok(None) }
    }

    fn text(&self, name: &str) -> Result<&'a str, SolveTimesError> {
        self.get(name, serde_json::Value::as_str, "a string")
    }

    fn count(&self, name: &str) -> Result<u32, SolveTimesError> {
        self.get(name, |value| value.as_u64().and_then(|n| u32::try_from(n).ok()), "a whole number under 2^32")
    }
}

impl fmt::Display for SolveTimes {
    /// `{"format":"captchaai-engine/solve-times","version":4,"type":..,"n":..,
    /// "seen":"from:to:weight,..","drift":"earlier:later"}`: at most 1 KiB (at most 56
    /// intervals).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut seen = String::new();
        for entry in &self.seen {
            if !seen.is_empty() {
                seen.push(',');
            }
            for (i, value) in [entry.from, entry.to, entry.weight].into_iter().enumerate() {
                if i > 0 {
                    seen.push(':');
                }
                seen.push_str(itoa::Buffer::new().format(value));
            }
        }
        let text = Text {
            format: FORMAT,
            version: VERSION,
            task_type: self.spec.name,
            n: self.observations,
            seen: &seen,
            poll_cost_ms: Some(self.poll_cost_ms.get()).filter(|&cost| cost != DEFAULT_POLL_COST_MS),
            drift: &self.drift.to_text(),
        };
        f.write_str(&serde_json::to_string(&text).map_err(|_| fmt::Error)?)
    }
}

impl FromStr for SolveTimes {
    type Err = SolveTimesError;

    /// Reads the text form (version 4, 3, 2 or 1, converted); every field is checked, so a parsed
    /// model behaves as one the engine built.
    fn from_str(text: &str) -> Result<SolveTimes, SolveTimesError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| SolveTimesError::Malformed(e.to_string()))?;
        if value.get("format").and_then(serde_json::Value::as_str) != Some(FORMAT) {
            return Err(SolveTimesError::Foreign);
        }
        let invalid = |why: String| SolveTimesError::Invalid(why);
        let (mut model, seen) = match value.get("version").and_then(serde_json::Value::as_u64) {
            Some(version @ (2 | 3 | VERSION)) => {
                let names = ["format", "version", "type", "n", "seen", "poll_cost_ms", "drift"];
                let read = Fields::of(&value, &names)?;
                let mut model = SolveTimes::new(read.text("type")?)?;
                model.observations = read.count("n")?;
                if let Some(cost) = read.optional("poll_cost_ms", serde_json::Value::as_u64, "a whole number")? {
                    POLL_COST_MS.check(cost).map_err(|e| invalid(e.message))?;
                    model.poll_cost_ms.set(cost);
                }
                let what = "`earlier:later`, each `sum` or `sum/edge`, within the limit and the deadline";
                let horizon = model.horizon();
                let parse = |value: &serde_json::Value| value.as_str().and_then(|text| Drift::parse(text, horizon));
                if let Some(drift) = read.optional("drift", parse, what)? {
                    if version == 2 {
                        return Err(invalid("a version 2 model has no `drift`".into()));
                    }
                    if version == 3 && (drift.earlier.edge.is_some() || drift.later.edge.is_some()) {
                        return Err(invalid("a version 3 model's `drift` has no edges".into()));
                    }
                    model.drift = drift;
                }
                let seen = parse_seen(read.text("seen")?, horizon)?;
                (model, seen)
            }
            Some(1) => {
                let names = ["format", "version", "type", "n", "fast_ms", "floor_ms", "calm", "hist", "missed"];
                let read = Fields::of(&value, &names)?;
                from_v1(read.text("type")?, read.count("n")?, read.text("hist")?, read.text("missed")?)?
            }
            Some(other) => return Err(SolveTimesError::UnsupportedVersion(other)),
            None => return Err(invalid("missing version".into())),
        };
        if seen.len() > ADAPTIVE.most_remembered || seen.len() > model.observations as usize {
            return Err(invalid(format!(
                "more intervals than observations or than {} ({})",
                ADAPTIVE.most_remembered,
                seen.len()
            )));
        }
        model.seen = seen;
        model.estimate();
        Ok(model)
    }
}

/// The intervals of a version-2, -3 or -4 text: `from:to:weight` in order, `from < to <= horizon`, each
/// weight at least an eighth of one observation and at most the steady state of one each time.
fn parse_seen(text: &str, horizon: u32) -> Result<Vec<Seen>, SolveTimesError> {
    let most = UNIT.saturating_mul(ADAPTIVE.memory + 1);
    let mut seen: Vec<Seen> = Vec::new();
    for entry in text.split(',').filter(|_| !text.is_empty()) {
        let bad = || {
            SolveTimesError::Invalid(format!(
                "interval `{}` is malformed, out of range or order",
                text::clip(entry, 40)
            ))
        };
        let mut parts = entry.split(':').map(|part| part.parse::<u32>().map_err(|_| bad()));
        let (Some(from), Some(to), Some(weight), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let new = Seen { from: from?, to: to?, weight: weight? };
        let in_order = seen.last().is_none_or(|last| (last.from, last.to) < (new.from, new.to));
        if new.from >= new.to || new.to > horizon || !(UNIT / 8..=most).contains(&new.weight) || !in_order {
            return Err(bad());
        }
        seen.push(new);
    }
    Ok(seen)
}

/// A version-1 model as intervals. Version 1 kept, per bucket (1 s wide below 64 s, then 4 s),
/// the decayed weight of `L`, the time of the poll before the one that found the answer, for
/// all solves (`hist`) and for those whose first poll found nothing (`missed`); for an answer
/// found at the first poll `L` was one interval before it. So a `missed` weight is an interval
/// from the bucket to one poll interval after it, and the rest of `hist` one from the submit to
/// the same end. Weights are scaled to this version's unit; the lightest beyond the most
/// remembered are dropped.
fn from_v1(task_type: &str, n: u32, hist: &str, missed: &str) -> Result<(SolveTimes, Vec<Seen>), SolveTimesError> {
    let mut model = SolveTimes::new(task_type)?;
    model.observations = n;
    let (hist, missed) = (v1_weights(hist)?, v1_weights(missed)?);
    let (horizon, interval) = (model.horizon(), (model.spec.poll_interval_ms / 1_000) as u32);
    let mut seen: Vec<Seen> = Vec::new();
    for (index, all) in hist.iter().enumerate().filter(|(_, w)| **w > 0) {
        let late = missed.get(index).copied().unwrap_or(0).min(*all);
        let (edge, width) = if index < 64 { (index as u32, 1) } else { (64 + (index as u32 - 64) * 4, 4) };
        let to = (edge + width + interval).min(horizon);
        for (from, weight) in [(0, all - late), (edge.min(to - 1), late)] {
            let weight = weight.saturating_mul(UNIT / 256).min(UNIT * ADAPTIVE.memory);
            if weight >= UNIT / 8 {
                match seen.iter_mut().find(|s| (s.from, s.to) == (from, to)) {
                    Some(same) => same.weight = same.weight.saturating_add(weight).min(UNIT * ADAPTIVE.memory),
                    None => seen.push(Seen { from, to, weight }),
                }
            }
        }
    }
    while seen.len() > ADAPTIVE.most_remembered {
        let lightest = (0..seen.len()).min_by_key(|&i| seen[i].weight).unwrap_or(0);
        seen.remove(lightest);
    }
    seen.sort();
    model.observations = model.observations.max(seen.len() as u32);
    Ok((model, seen))
}

/// Version 1's `bucket:weight,..` (128 buckets, in order).
fn v1_weights(text: &str) -> Result<Vec<u32>, SolveTimesError> {
    let mut weights = vec![0u32; 128];
    let mut last = None;
    for entry in text.split(',').filter(|_| !text.is_empty()) {
        let bad = || SolveTimesError::Invalid(format!("weight `{}` is malformed", text::clip(entry, 40)));
        let (index, weight) = entry.split_once(':').ok_or_else(bad)?;
        let (index, weight) = (index.parse::<usize>().map_err(|_| bad())?, weight.parse::<u32>().map_err(|_| bad())?);
        if index >= weights.len() || last.is_some_and(|l| index <= l) {
            return Err(bad());
        }
        weights[index] = weight;
        last = Some(index);
    }
    Ok(weights)
}
