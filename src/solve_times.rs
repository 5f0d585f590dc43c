//! A learned model of one captcha type's solve times, and the first and second waits it gives:
//! the data half of adaptive polling (the rule's constants and its description are
//! [`crate::registry::ADAPTIVE`], beside the type table).
//!
//! Plain data and pure arithmetic on integers: no clock, no randomness, no key or token (only
//! the type's name, counts and times). Hosts [`SolveTimes::observe`] finished solves and create
//! solves with [`crate::Solve::with_solve_times`]; the text form ([`SolveTimes`]'s `Display`
//! and `FromStr`) is versioned JSON of a few hundred bytes.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config::INITIAL_WAIT_MS;
use crate::outcome::Solution;
use crate::registry::{self, ADAPTIVE, TypeSpec};
use crate::text;

/// Identifies the text form.
const FORMAT: &str = "captchaai-engine/solve-times";
/// The text form's version this engine writes and reads.
const VERSION: u64 = 1;
/// Histogram buckets: 1 s wide below 64 s, then 4 s wide up to 320 s (the last holds the rest).
const BUCKETS: usize = 128;

/// A learned gap in a type's solve times: after `after_polls` regular polls that found nothing
/// (the first at the first wait, then one every interval), the next poll waits `wait_ms`, more
/// than the interval, instead of the interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gap {
    /// Regular polls before the gap, at least 1.
    pub after_polls: u32,
    /// The wait after the last of them.
    pub wait_ms: u64,
}

impl Gap {
    /// When the last regular poll before the gap is sent, in ms after the submit, for a solve
    /// whose first poll comes `first_wait_ms` after it.
    pub(crate) fn last_regular_poll_ms(&self, first_wait_ms: u64, interval_ms: u64) -> u64 {
        nth_poll_ms(first_wait_ms, self.after_polls, interval_ms)
    }
}

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
    #[error("solve-times version {0} is not supported (this engine reads version {VERSION})")]
    UnsupportedVersion(u64),
    /// Our format, but the content is out of range, or the type is unknown.
    #[error("solve times are invalid: {0}")]
    Invalid(String),
}

/// What one captcha type's finished solves took, decayed so that it follows drift (it weighs
/// about the last 50 observations), and the waits it gives a new solve of that type. Under 20
/// observations it gives none: the type's table applies unchanged. Then: a later first wait
/// when nearly all answers come after the table's (one of the table's own poll times, at or
/// below the 6% quantile of the learned solve times); an earlier one, learned by lowering it
/// while answers keep coming at the first poll, when nearly all come before it; a longer second
/// wait over a gap between two groups of solve times. Never under 1 s, never polls closer than the type's 5 s interval, never past the
/// deadline; the rule, with its constants, is documented beside the type table (`ADAPTIVE` in
/// `registry.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SolveTimes {
    spec: &'static TypeSpec,
    /// Observations so far (saturating).
    observations: u32,
    /// The learned early first wait, at most the table's.
    fast_ms: u64,
    /// The least `fast_ms` may drop to: left by an answer that came after an early first poll.
    floor_ms: u64,
    /// Observations in a row answered by the table's first wait (saturating).
    calm: u32,
    /// Decayed weights of the observed lower bounds of the submit-to-ready time.
    weights: [u32; BUCKETS],
    /// The same, of the solves whose first poll found nothing only (true lower bounds).
    missed: [u32; BUCKETS],
}

impl SolveTimes {
    /// An empty model of a captcha type (its `type` in task JSON).
    pub fn new(task_type: &str) -> Result<SolveTimes, SolveTimesError> {
        let spec = registry::lookup(task_type)
            .ok_or_else(|| SolveTimesError::Invalid(format!("unknown captcha type `{task_type}`")))?;
        Ok(SolveTimes {
            spec,
            observations: 0,
            fast_ms: spec.initial_wait_ms,
            floor_ms: 0,
            calm: 0,
            weights: [0; BUCKETS],
            missed: [0; BUCKETS],
        })
    }

    /// The captcha type this model is of.
    pub fn task_type(&self) -> &'static str {
        self.spec.name
    }

    /// Observations so far.
    pub fn observations(&self) -> u32 {
        self.observations
    }

    /// Learns from a finished solve of this model's type. Returns whether it was used: only a
    /// solve of one attempt with at least one poll is (a resubmitted or synchronous solve's
    /// times say nothing about one task's solve time). Solves of another type must not be
    /// given: the solution does not name its type.
    pub fn observe(&mut self, solution: &Solution) -> bool {
        if solution.attempts != 1 || solution.polls == 0 {
            return false;
        }
        let (table, interval) = (self.spec.initial_wait_ms, self.spec.poll_interval_ms);
        let elapsed = solution.elapsed_ms;
        // The first wait this model gave (the solve was most likely created with it).
        let used = self.first_wait_ms().unwrap_or(table);
        for weight in self.weights.iter_mut().chain(self.missed.iter_mut()) {
            // Decayed, and forgotten below an eighth of one observation (a short text form).
            *weight -= *weight / ADAPTIVE.decay;
            if *weight < ADAPTIVE.weight / 8 {
                *weight = 0;
            }
        }
        // A lower bound of the ready time: the answer was not there at the poll before (for one
        // found at the poll after a gap, the last regular poll before it, or without a gap, for
        // one found at the second poll, the first, at the first wait; for one found at the first
        // poll, a guess: one interval earlier).
        let previous = elapsed.saturating_sub(interval);
        let used_gap = self.gap(used);
        let regular_polls = used_gap.map_or(1, |gap| gap.after_polls);
        let last_regular = nth_poll_ms(used, regular_polls, interval);
        let index = bucket(if solution.polls == regular_polls + 1 { last_regular.min(previous) } else { previous });
        self.weights[index] = self.weights[index].saturating_add(ADAPTIVE.weight);
        if solution.polls > 1 {
            self.missed[index] = self.missed[index].saturating_add(ADAPTIVE.weight);
        }
        self.observations = self.observations.saturating_add(1);

        // Late: answered after the table's first wait. With a gap after the table's first wait
        // (two groups of solve times), late answers belong to the later group, which the second
        // wait serves, and say nothing about the early one.
        let gap = self.gap(table).is_some();
        let late = elapsed > table.saturating_add(interval / 2) && !gap;
        if solution.polls > 1 && used < table {
            // An early first poll found nothing. Answered by the next poll (one interval later,
            // or at a gap's wait right after it): wait a little longer. A later answer says
            // nothing about the early group.
            let next = elapsed <= used.saturating_add(interval + interval / 2);
            let at_gap = solution.polls == 2 && used_gap.is_some_and(|gap| gap.after_polls == 1);
            let floor = if next {
                used.saturating_add(interval / ADAPTIVE.miss_step).min(table)
            } else if at_gap {
                used
            } else {
                0
            };
            self.floor_ms = self.floor_ms.max(floor);
        }
        if late {
            self.calm = 0;
        } else {
            self.calm = self.calm.saturating_add(1);
            if solution.polls == 1 && self.calm >= ADAPTIVE.calm {
                self.fast_ms = self.fast_ms.saturating_sub(self.fast_ms / ADAPTIVE.fast_step);
            }
        }
        self.fast_ms = self.fast_ms.max(self.floor_ms).clamp(INITIAL_WAIT_MS.min, table.max(INITIAL_WAIT_MS.min));
        self.floor_ms -= self.floor_ms / ADAPTIVE.floor_decay;
        true
    }

    /// The first wait this model gives a solve of its type (before the deadline check a solve
    /// makes), or `None` under the minimum of 20 observations.
    pub fn first_wait_ms(&self) -> Option<u64> {
        if self.observations < ADAPTIVE.min_observations {
            return None;
        }
        let late = self.quantile_ms(ADAPTIVE.quantile_permille).unwrap_or(0);
        let (table, interval) = (self.spec.initial_wait_ms, self.spec.poll_interval_ms);
        let sum = |weights: &[u32]| weights.iter().map(|&w| u64::from(w)).sum::<u64>();
        let (all, missed) = (sum(&self.weights), sum(&self.missed));
        // Enough answers found at the first poll for an early one to pay.
        let early = (all - missed) * 1000 >= all * ADAPTIVE.early_permille;
        let wait = match late {
            // Down to one of the table's own poll times: an answer ready after the table's poll
            // before it is seen when the table would have seen it. And at most one interval
            // after the poll time at or below the `late_before` quantile: few answers were ready
            // before the table's poll it replaces.
            late if late > table => {
                let before = self.quantile_ms(ADAPTIVE.late_before_permille).unwrap_or(0);
                let latest = poll_time_at_or_below(before, table, interval).saturating_add(interval);
                poll_time_at_or_below(late, table, interval).min(latest).max(table)
            }
            _ if self.calm >= ADAPTIVE.calm && early => self.fast_ms,
            _ => table,
        };
        Some(wait.clamp(INITIAL_WAIT_MS.min, INITIAL_WAIT_MS.max))
    }

    /// The gap a solve with the first wait `first_wait_ms` skips, if the model puts almost no
    /// answers in it (between two groups of solve times): after the first of
    /// [`crate::registry::ADAPTIVE`]'s `gap_max_polls` regular polls whose next interval holds at
    /// most `gap_near_permille` of the weight, a wait until the `gap_permille` quantile of the
    /// lower bounds of the solves whose first poll found nothing, from that next interval on.
    /// `None` (regular polls) when that wait is no more than the interval, or under the minimum
    /// of observations.
    pub(crate) fn gap(&self, first_wait_ms: u64) -> Option<Gap> {
        if self.observations < ADAPTIVE.min_observations {
            return None;
        }
        let interval = self.spec.poll_interval_ms;
        let sum = |weights: &[u32]| weights.iter().map(|&w| u64::from(w)).sum::<u64>();
        let total = sum(&self.weights);
        // A few misses answered within an interval of a poll (the early group's slowest) do not
        // close the gap after it; more are worth one more regular poll first.
        let after_polls = (1..=ADAPTIVE.gap_max_polls).find(|&n| {
            let poll = nth_poll_ms(first_wait_ms, n, interval);
            let (at, next) = (bucket(poll), bucket(poll.saturating_add(interval)));
            sum(&self.missed[at.min(next)..next]) * 1000 <= total * ADAPTIVE.gap_near_permille
        })?;
        let poll = nth_poll_ms(first_wait_ms, after_polls, interval);
        let from = bucket(poll.saturating_add(interval));
        let edge = quantile(&self.missed[from..], ADAPTIVE.gap_permille, interval)? + lower_edge_ms(from);
        let wait_ms = edge.saturating_sub(poll);
        (wait_ms > interval).then_some(Gap { after_polls, wait_ms })
    }

    /// The `permille` quantile (0-1000) of the submit-to-ready time as the model sees it (each
    /// observed lower bound spread over the poll interval after it), as its bucket's lower edge
    /// in ms; `None` with nothing observed or forgotten.
    pub fn quantile_ms(&self, permille: u64) -> Option<u64> {
        quantile(&self.weights, permille, self.spec.poll_interval_ms)
    }
}

/// The `permille` quantile of decayed weights over buckets, each weight spread evenly over the
/// buckets of the poll interval its lower bound starts (the ready time was somewhere in there),
/// as ms from the first bucket's lower edge to the quantile's bucket's; `None` when all weights
/// are zero. Integer arithmetic: a weight spread over `k` buckets adds `weight * 60 / k` to each.
fn quantile(weights: &[u32], permille: u64, interval: u64) -> Option<u64> {
    let offset = BUCKETS - weights.len();
    let mut spread = [0u64; BUCKETS];
    for (j, &weight) in weights.iter().enumerate().filter(|(_, w)| **w > 0) {
        let start = lower_edge_ms(offset + j);
        let last = bucket(start.saturating_add(interval).saturating_sub(1)).max(offset + j);
        let share = u64::from(weight) * 60 / (last - (offset + j) + 1) as u64;
        for slot in &mut spread[offset + j..=last] {
            *slot += share;
        }
    }
    let spread = &spread[offset..];
    let total: u64 = spread.iter().sum();
    if total == 0 {
        return None;
    }
    let target = total.saturating_mul(permille.min(1000)) / 1000;
    let mut seen = 0;
    let index = spread
        .iter()
        .position(|&weight| {
            seen += weight;
            weight > 0 && seen > target
        })
        .or_else(|| spread.iter().rposition(|&w| w > 0))?;
    Some(lower_edge_ms(offset + index) - lower_edge_ms(offset))
}

/// Weights as text: `bucket:weight` of the buckets with weight, in bucket order, comma-separated.
fn sparse(weights: &[u32; BUCKETS]) -> String {
    let mut text = String::new();
    for (index, weight) in weights.iter().enumerate().filter(|(_, w)| **w > 0) {
        if !text.is_empty() {
            text.push(',');
        }
        text.push_str(itoa::Buffer::new().format(index));
        text.push(':');
        text.push_str(itoa::Buffer::new().format(*weight));
    }
    text
}

/// Weights from [`sparse`]'s text: buckets in order, each weight at most the steady state of
/// one observation each time.
fn dense(text: &str) -> Result<[u32; BUCKETS], SolveTimesError> {
    let most = ADAPTIVE.weight.saturating_mul(ADAPTIVE.decay).saturating_mul(2);
    let mut weights = [0; BUCKETS];
    let mut last = None;
    for entry in text.split(',').filter(|_| !text.is_empty()) {
        let bad = || {
            SolveTimesError::Invalid(format!("weight `{}` is malformed, out of range or order", text::clip(entry, 40)))
        };
        let (index, weight) = entry.split_once(':').ok_or_else(bad)?;
        let (index, weight) = (index.parse::<usize>().map_err(|_| bad())?, weight.parse::<u32>().map_err(|_| bad())?);
        if index >= BUCKETS || last.is_some_and(|l| index <= l) || weight == 0 || weight > most {
            return Err(bad());
        }
        weights[index] = weight;
        last = Some(index);
    }
    Ok(weights)
}

/// When regular poll `n` (from 1) is sent, in ms after the submit.
fn nth_poll_ms(first_wait_ms: u64, n: u32, interval_ms: u64) -> u64 {
    first_wait_ms.saturating_add(u64::from(n.saturating_sub(1)).saturating_mul(interval_ms))
}

/// The last of a row's poll times (its first wait `table` plus or minus whole intervals) at or
/// below `ms`, or 0.
fn poll_time_at_or_below(ms: u64, table: u64, interval: u64) -> u64 {
    if ms >= table {
        ms - (ms - table) % interval
    } else {
        table.saturating_sub((table - ms).div_ceil(interval).saturating_mul(interval))
    }
}

/// The bucket of a time in ms.
fn bucket(ms: u64) -> usize {
    let seconds = ms / 1_000;
    let index = if seconds < 64 { seconds } else { 64 + (seconds - 64) / 4 };
    usize::try_from(index).unwrap_or(BUCKETS - 1).min(BUCKETS - 1)
}

/// A bucket's lower edge in ms.
fn lower_edge_ms(index: usize) -> u64 {
    let index = index as u64;
    if index < 64 { index * 1_000 } else { (64 + (index - 64) * 4) * 1_000 }
}

/// The text form.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Text<'a> {
    format: &'a str,
    version: u64,
    #[serde(rename = "type")]
    task_type: &'a str,
    n: u32,
    fast_ms: u64,
    floor_ms: u64,
    calm: u32,
    /// `bucket:weight,..` of the buckets with weight, in bucket order.
    hist: Cow<'a, str>,
    /// The same, of the solves whose first poll found nothing.
    missed: Cow<'a, str>,
}

impl fmt::Display for SolveTimes {
    /// `{"format":"captchaai-engine/solve-times","version":1,"type":..,"n":..,"fast_ms":..,
    /// "floor_ms":..,"calm":..,"hist":"bucket:weight,..","missed":".."}`: at most 1 KiB (a weight
    /// is forgotten about 50 observations after it was added, so few buckets hold one).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (hist, missed) = (sparse(&self.weights).into(), sparse(&self.missed).into());
        let text = Text {
            format: FORMAT,
            version: VERSION,
            task_type: self.spec.name,
            n: self.observations,
            fast_ms: self.fast_ms,
            floor_ms: self.floor_ms,
            calm: self.calm,
            hist,
            missed,
        };
        f.write_str(&serde_json::to_string(&text).map_err(|_| fmt::Error)?)
    }
}

impl FromStr for SolveTimes {
    type Err = SolveTimesError;

    /// Reads the text form; every field is checked, so a parsed model behaves as one the engine
    /// built.
    fn from_str(text: &str) -> Result<SolveTimes, SolveTimesError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| SolveTimesError::Malformed(e.to_string()))?;
        if value.get("format").and_then(serde_json::Value::as_str) != Some(FORMAT) {
            return Err(SolveTimesError::Foreign);
        }
        match value.get("version").and_then(serde_json::Value::as_u64) {
            Some(VERSION) => {}
            Some(other) => return Err(SolveTimesError::UnsupportedVersion(other)),
            None => return Err(SolveTimesError::Invalid("missing version".into())),
        }
        let invalid = |why: String| SolveTimesError::Invalid(why);
        let read = Text::deserialize(&value).map_err(|e| invalid(e.to_string()))?;
        let mut model = SolveTimes::new(read.task_type)?;
        let table = model.spec.initial_wait_ms.max(INITIAL_WAIT_MS.min);
        if !(INITIAL_WAIT_MS.min..=table).contains(&read.fast_ms) || read.floor_ms > table {
            return Err(invalid(format!("fast_ms or floor_ms out of range (at most {table})")));
        }
        model.weights = dense(&read.hist)?;
        model.missed = dense(&read.missed)?;
        if model.missed.iter().zip(&model.weights).any(|(m, w)| m > w) {
            return Err(invalid("missed holds more than hist".into()));
        }
        model.observations = read.n;
        model.fast_ms = read.fast_ms;
        model.floor_ms = read.floor_ms;
        model.calm = read.calm;
        Ok(model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_time_in_order() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(63_999), 63);
        assert_eq!(bucket(64_000), 64);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        for index in 0..BUCKETS {
            assert_eq!(bucket(lower_edge_ms(index)), index);
        }
    }
}
