//! Adaptive polling's family of poll schedules, and the planner that picks the one with the least
//! expected cost from an estimate of a type's ready times (the rule, with its constants, is
//! [`crate::registry::ADAPTIVE`], beside the type table).
//!
//! A schedule of the family: the first poll `first_wait` after the submit (on the whole-second
//! grid from the minimum first wait), then a poll every interval, except that one wait (after
//! any poll) may be longer, to another whole second. A solve answered `T` after its submit is
//! seen at the first poll at or after `T`; its cost is the wait from `T` to that poll plus `c`
//! (the config's `poll_cost_ms`) for each poll sent. Pure integer arithmetic.

use crate::registry::ADAPTIVE;

/// A longer wait: after `after_polls` regular polls that found nothing (the first at the first
/// wait, then one every interval), the next poll waits `wait_ms`, more than the interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// Regular polls before the longer wait, at least 1.
    pub after_polls: u32,
    /// The wait after the last of them.
    pub wait_ms: u64,
}

impl Gap {
    /// When the last regular poll before the longer wait is sent, in ms after the submit, for a
    /// solve whose first poll comes `first_wait_ms` after it.
    pub(crate) fn last_regular_poll_ms(&self, first_wait_ms: u64, interval_ms: u64) -> u64 {
        nth_poll_ms(first_wait_ms, self.after_polls, interval_ms)
    }
}

/// A poll schedule of adaptive polling's family: the first poll `first_wait_ms` after the
/// submit, then one every poll interval, except for an optional longer wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The wait from the submit to the first poll.
    pub first_wait_ms: u64,
    /// The longer wait, if any.
    pub gap: Option<Gap>,
}

impl Schedule {
    /// When poll `n` (from 1) is sent, in ms after the submit, with polls `interval_ms` apart.
    pub fn poll_ms(&self, n: u32, interval_ms: u64) -> u64 {
        match self.gap {
            Some(gap) if n > gap.after_polls => gap
                .last_regular_poll_ms(self.first_wait_ms, interval_ms)
                .saturating_add(gap.wait_ms)
                .saturating_add(u64::from(n - gap.after_polls - 1).saturating_mul(interval_ms)),
            _ => nth_poll_ms(self.first_wait_ms, n, interval_ms),
        }
    }
}

/// The most exploring schedules a plan holds.
pub(crate) const PROBES: usize = 4;

/// What a model gives new solves of its type for one poll cost: the schedule of least expected
/// cost, and the exploring schedules a few solves take instead (the best of the family with an
/// earlier first wait), so that the ready times before the first poll are learned too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The schedule of least expected cost.
    pub main: Schedule,
    /// The exploring schedules, `probes[..probe_count]`.
    probes: [Schedule; PROBES],
    probe_count: usize,
    /// Solves that explore, per 65,536.
    explore_per_65536: u64,
}

impl Plan {
    /// The schedule a solve created at `now` (its submit time, epoch ms) gets: whether it explores
    /// and which exploring schedule it takes are a hash of `now`, so the model can tell from a
    /// solution's `submitted_at` which schedule found it.
    pub(crate) fn for_solve(&self, now: u64) -> Schedule {
        let hash = mix(now);
        if self.probe_count > 0 && hash & 0xFFFF < self.explore_per_65536 {
            self.probes[((hash >> 16) % self.probe_count as u64) as usize]
        } else {
            self.main
        }
    }
}

/// SplitMix64's finalizer: a well-spread hash of a 64-bit value.
fn mix(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// When regular poll `n` (from 1) is sent, in ms after the submit.
pub(crate) fn nth_poll_ms(first_wait_ms: u64, n: u32, interval_ms: u64) -> u64 {
    first_wait_ms.saturating_add(u64::from(n.saturating_sub(1)).saturating_mul(interval_ms))
}

/// The plan for an estimate of the ready times: `mass[j]` is the share (of the total) ready
/// between `j` and `j + 1` seconds after the submit, for `j` below the type's deadline in
/// seconds; polls are `interval_ms` apart (whole seconds, at least 5) and cost `poll_cost_ms`
/// each; first waits start at `min_first_wait_ms` (whole seconds). `None` when nothing is
/// estimated or no first wait fits before the deadline.
pub(crate) fn plan(mass: &[u64], interval_ms: u64, min_first_wait_ms: u64, poll_cost_ms: u64) -> Option<Plan> {
    let costs = Costs::new(mass, interval_ms, min_first_wait_ms, poll_cost_ms)?;
    let main = costs.best();
    let (main_cost, main_polls) = costs.of(main);
    // Exploring first waits: one and two seconds before and after the main one (every phase of
    // a 5 s interval); after it only when some mass is estimated after it (else a later first
    // poll teaches nothing). Each takes the better of regular polls from there and the main
    // schedule's longer wait (to the same end) from there. Probes further away (halfway to the
    // minimum first wait, and the minimum) were measured worse on a steady mix: they cost most
    // of the budget, so fewer solves explore. They settled no more shifts within 100 solves,
    // though the first solves after a shift to faster answers cost less with them (BENCHMARKS.md).
    let mut probes = [Schedule { first_wait_ms: 0, gap: None }; PROBES];
    let mut probe_count = 0;
    let (mut extra_cost, mut extra_polls) = (0u64, 0u64);
    let before = |seconds: usize| main.wait.checked_sub(seconds).filter(|&wait| wait >= costs.min_wait);
    let after = |seconds: usize| {
        Some(main.wait + seconds).filter(|&wait| wait <= costs.max_wait() && costs.survival[main.wait] > 0)
    };
    for wait in [before(1), before(2), after(1), after(2)].into_iter().flatten() {
        // The main schedule's longer wait, moved to the probe, when it is still longer than an interval.
        let regular = Seconds { wait, after: 0, until: 0 };
        let gapped = Seconds { wait, ..main };
        let gap_fits = main.after > 0 && main.until > wait + main.after * costs.interval;
        let best = if gap_fits && costs.of(gapped).0 < costs.of(regular).0 { gapped } else { regular };
        let (cost, polls) = costs.of(best);
        extra_cost += cost.saturating_sub(main_cost);
        extra_polls += polls.saturating_sub(main_polls);
        probes[probe_count] = costs.schedule(best);
        probe_count += 1;
    }
    // As many exploring solves as the budget allows: their mean extra polls and extra cost at
    // most `explore_permille` of the main schedule's.
    let share = |allowed: u64, extra: u64| -> u64 {
        let extra = extra / probe_count.max(1) as u64;
        if extra == 0 { 1 << 16 } else { (u128::from(allowed) * (1 << 16) / u128::from(extra)) as u64 }
    };
    let allowed = |total: u64| total / 1_000 * ADAPTIVE.explore_permille;
    let whole_cost = (main_cost + costs.survival[0] * poll_cost_ms).saturating_sub(costs.wait_before_ready);
    let explore_per_65536 = share(allowed(main_polls), extra_polls)
        .min(share(allowed(whole_cost), extra_cost))
        .min(ADAPTIVE.most_exploring_per_65536);
    Some(Plan { main: costs.schedule(main), probes, probe_count, explore_per_65536 })
}

/// A schedule in whole seconds: the first wait, and the longer wait after poll `after` (0:
/// none) to `until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seconds {
    wait: usize,
    after: usize,
    until: usize,
}

/// The longest horizon planned, in seconds (the longest deadline of the type table).
pub(crate) const MOST_SECONDS: usize = 300;

/// The planner reads an estimate of total mass up to `2^32` as at most `2^20`: every cost then
/// fits an `i64` (a cost is under `2^43`: 300 s and 60 polls of 65 s at most, times `2^20`),
/// and so do the lower envelope's cross products (under `2^41` times `2^20`).
const PLAN_SHIFT: u32 = 12;

/// Expected costs of the family's schedules under one estimate, in ms times mass (the total
/// mass, `one`, stands for certainty).
struct Costs {
    /// `survival[t]`: the mass ready after `t` seconds (the mass a poll at `t` does not find),
    /// for `t` up to the horizon, where it is 0.
    survival: Vec<u64>,
    /// `ahead[t]`: the sum of `survival` at `t`, `t + interval`, ... below the horizon (the
    /// expected polls after one at `t`, of regular polls from there).
    ahead: Vec<u64>,
    /// The poll interval in seconds, and in ms plus the cost of a poll.
    interval: usize,
    step_cost: u64,
    poll_cost_ms: u64,
    /// The least first wait, and the horizon (no poll at or after it), in seconds.
    min_wait: usize,
    horizon: usize,
    /// The first and the last second with mass.
    first: usize,
    last: usize,
    /// `one` times the mean wait from the submit to the ready time (cost excludes it).
    wait_before_ready: u64,
}

impl Costs {
    fn new(mass: &[u64], interval_ms: u64, min_first_wait_ms: u64, poll_cost_ms: u64) -> Option<Costs> {
        let horizon = mass.len().min(MOST_SECONDS);
        let interval = usize::try_from(interval_ms / 1_000).ok()?.max(1);
        let min_wait = usize::try_from(min_first_wait_ms.div_ceil(1_000)).ok()?.max(1);
        if min_wait + interval > horizon {
            return None;
        }
        let mut survival = vec![0u64; horizon + 1];
        for t in (0..horizon).rev() {
            survival[t] = survival[t + 1] + (mass[t] >> PLAN_SHIFT);
        }
        if survival[0] == 0 {
            return None;
        }
        let first = survival.iter().position(|&s| s < survival[0]).unwrap_or(1) - 1;
        let last = survival.iter().position(|&s| s == 0).unwrap_or(horizon).min(horizon) - 1;
        let mut ahead = vec![0u64; horizon];
        for t in (0..horizon).rev() {
            ahead[t] = survival[t] + if t + interval < horizon { ahead[t + interval] } else { 0 };
        }
        // Mass in second `j` is ready at `j + 0.5` s on average.
        let wait_before_ready =
            mass[..horizon].iter().enumerate().map(|(j, &m)| (m >> PLAN_SHIFT) * (j as u64 * 1_000 + 500)).sum();
        let step_cost = interval as u64 * 1_000 + poll_cost_ms;
        Some(Costs {
            survival,
            ahead,
            interval,
            step_cost,
            poll_cost_ms,
            min_wait,
            horizon,
            first,
            last,
            wait_before_ready,
        })
    }

    /// The latest first wait: one interval before the horizon.
    fn max_wait(&self) -> usize {
        self.horizon - self.interval
    }

    /// The first waits worth trying: from the second after the first with mass (a poll before
    /// anything is ready finds nothing: the schedule without it costs less), to the second after
    /// the last (later, every answer waits longer).
    fn waits(&self) -> std::ops::RangeInclusive<usize> {
        let latest = self.max_wait().min(self.last + 1);
        self.min_wait.max(self.first + 1).min(latest)..=latest
    }

    /// A schedule's cost (less the mean ready time and the first poll's price, the same for
    /// every schedule) and its expected polls, times `one`.
    fn of(&self, schedule: Seconds) -> (u64, u64) {
        let Seconds { wait, after, until } = schedule;
        let one = self.survival[0];
        if after == 0 {
            return (self.regular(wait), one + self.ahead[wait]);
        }
        let last = wait + (after - 1) * self.interval;
        (
            self.with_gap(wait, after, until),
            one + self.ahead[wait] - self.ahead[last] + self.survival[last] + self.ahead[until],
        )
    }

    /// The cost, less a constant, of regular polls from a first poll at `wait`.
    fn regular(&self, wait: usize) -> u64 {
        wait as u64 * 1_000 * self.survival[0] + self.step_cost * self.ahead[wait]
    }

    /// The cost, less the same constant, of polls from `wait` with the longer wait after poll
    /// `after` (at least 1) to `until`: the regular polls before it, the longer wait, regular
    /// polls after.
    fn with_gap(&self, wait: usize, after: usize, until: usize) -> u64 {
        let last = wait + (after - 1) * self.interval;
        wait as u64 * 1_000 * self.survival[0]
            + self.step_cost * (self.ahead[wait] - self.ahead[last])
            + ((until - last) as u64 * 1_000 + self.poll_cost_ms) * self.survival[last]
            + self.step_cost * self.ahead[until]
    }

    /// The schedule of least cost (ties: no longer wait, then the earlier first wait).
    fn best(&self) -> Seconds {
        let mut best = (u64::MAX, Seconds { wait: self.min_wait, after: 0, until: 0 });
        for wait in self.waits() {
            let cost = self.regular(wait);
            if cost < best.0 {
                best = (cost, Seconds { wait, after: 0, until: 0 });
            }
        }
        match self.best_gap() {
            Some((cost, gapped)) if cost < best.0 => gapped,
            _ => best.1,
        }
    }

    /// The least cost with a longer wait, over the first waits worth trying, any number of
    /// regular polls before the longer wait, and every end of it up to the second after the last
    /// with mass (a later end costs more). Two passes over the seconds:
    ///
    /// - `arrive[t]`: the least cost of the polls up to one at `t` (a first poll at `t`, or the
    ///   best way to a poll at `t - interval` and a regular poll after it);
    /// - for each end `until` (increasing), the polls `t` it can follow are lines in `until`
    ///   (slope: the mass not found by `t`; intercept from `arrive[t]`), and the least is read off
    ///   their lower envelope, kept as `until` grows (the convex hull trick).
    ///
    /// Linear in the horizon, where trying every first wait, poll and end is cubic.
    fn best_gap(&self) -> Option<(u64, Seconds)> {
        let waits = self.waits();
        let (start, interval, one) = (*waits.start(), self.interval, self.survival[0]);
        let end = self.horizon.min(self.last + 2);
        if start + interval + 1 >= end {
            return None;
        }
        // (cost to a poll at t, its first wait), from `start` on.
        let mut arrive = vec![(0u64, 0usize); end];
        for t in start..end {
            let first = waits.contains(&t).then(|| (t as u64 * 1_000 * one, t));
            let regular = t
                .checked_sub(interval)
                .filter(|&before| before >= start)
                .map(|before| (arrive[before].0 + self.step_cost * self.survival[before], arrive[before].1));
            arrive[t] = match (first, regular) {
                (Some(first), Some(regular)) if regular.0 < first.0 => regular,
                (Some(first), _) => first,
                (None, Some(regular)) => regular,
                (None, None) => (u64::MAX / 4, start),
            };
        }
        let mut hull = Hull { lines: Vec::with_capacity(end - start) };
        let mut at = 0;
        let mut best: Option<(u64, usize, usize)> = None;
        for until in start + interval + 1..end {
            // The latest poll a longer wait to `until` can follow.
            let last = until - interval - 1;
            let slope = self.survival[last] as i64;
            let intercept = arrive[last].0 as i64 - (last as u64 * 1_000) as i64 * slope;
            hull.push(Line { slope, intercept, last });
            at = at.min(hull.lines.len() - 1);
            let lines = &hull.lines;
            let x = (until as u64 * 1_000 + self.poll_cost_ms) as i64;
            while at + 1 < lines.len() && lines[at + 1].at(x) < lines[at].at(x) {
                at += 1;
            }
            let cost = (lines[at].at(x) + (self.step_cost * self.ahead[until]) as i64).max(0) as u64;
            if best.is_none_or(|(least, _, _)| cost < least) {
                best = Some((cost, lines[at].last, until));
            }
        }
        let (cost, last, until) = best?;
        let wait = arrive[last].1;
        Some((cost, Seconds { wait, after: (last - wait) / interval + 1, until }))
    }

    /// The schedule in ms.
    fn schedule(&self, seconds: Seconds) -> Schedule {
        let Seconds { wait, after, until } = seconds;
        let last = wait + after.saturating_sub(1) * self.interval;
        let gap = (after > 0).then(|| Gap { after_polls: after as u32, wait_ms: (until - last) as u64 * 1_000 });
        Schedule { first_wait_ms: wait as u64 * 1_000, gap }
    }
}

/// A line of the lower envelope: the cost of a longer wait after a poll at `last` as a function
/// of its end (plus the poll cost), in ms.
#[derive(Clone, Copy)]
struct Line {
    slope: i64,
    intercept: i64,
    last: usize,
}

impl Line {
    fn at(&self, x: i64) -> i64 {
        self.slope * x + self.intercept
    }
}

/// The lower envelope of lines added in order of no greater slope.
struct Hull {
    lines: Vec<Line>,
}

impl Hull {
    /// Adds a line, dropping the lines it hides (for equal slopes the lower line stays, the
    /// earlier on a tie).
    fn push(&mut self, line: Line) {
        while let Some(&last) = self.lines.last() {
            if last.slope == line.slope {
                if line.intercept >= last.intercept {
                    return;
                }
                self.lines.pop();
                continue;
            }
            let Some(&first) = self.lines.len().checked_sub(2).map(|i| &self.lines[i]) else { break };
            // `last` is hidden when `line` meets `first` no later than `last` does.
            if (line.intercept - first.intercept) * (first.slope - last.slope)
                <= (last.intercept - first.intercept) * (first.slope - line.slope)
            {
                self.lines.pop();
            } else {
                break;
            }
        }
        self.lines.push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The planner's answer costs the least of every schedule of the family (every first wait,
    /// and every longer wait after any poll).
    #[test]
    fn the_plan_is_the_least_of_the_whole_family() {
        let shapes: [&[(usize, u64)]; 5] = [
            &[(4, 5), (5, 5), (6, 5), (40, 3), (41, 4), (55, 3)],
            &[(2, 1), (30, 1)],
            &[(10, 9), (11, 1), (70, 2), (100, 1)],
            &[(1, 1), (3, 1), (9, 1), (18, 1), (33, 1), (64, 1), (90, 1)],
            &[(0, 1), (119, 1)],
        ];
        for shape in shapes {
            let mut mass = vec![0u64; 120];
            for &(second, weight) in shape {
                mass[second] = weight << 28;
            }
            for poll_cost_ms in [0, 250, 1_000, 4_000, 60_000] {
                let costs = Costs::new(&mass, 5_000, 1_000, poll_cost_ms).unwrap();
                let mut least = u64::MAX;
                for wait in costs.min_wait..=costs.max_wait() {
                    least = least.min(costs.regular(wait));
                    for last in (wait..costs.horizon).step_by(costs.interval) {
                        let after = (last - wait) / costs.interval + 1;
                        for until in last + costs.interval + 1..costs.horizon {
                            least = least.min(costs.with_gap(wait, after, until));
                        }
                    }
                }
                assert_eq!(costs.of(costs.best()).0, least, "{shape:?} at {poll_cost_ms} ms");
            }
        }
    }

    /// The closed forms agree with walking each schedule's polls: the wait to the poll after
    /// each second's mass (its end), plus the price of every poll sent until then.
    #[test]
    fn closed_forms_match_the_walk() {
        let mut mass = vec![0u64; 120];
        for (second, weight) in [(3, 2u64), (7, 1), (12, 3), (44, 2), (80, 1)] {
            mass[second] = weight << 28;
        }
        let costs = Costs::new(&mass, 5_000, 1_000, 700).unwrap();
        let walk = |seconds: Seconds| {
            let schedule = costs.schedule(seconds);
            let (mut cost, mut polls) = (0, 0);
            for (second, &m) in mass.iter().enumerate().filter(|(_, m)| **m > 0) {
                let m = m >> PLAN_SHIFT;
                let n = (1..).find(|&n| schedule.poll_ms(n, 5_000) >= (second as u64 + 1) * 1_000).unwrap();
                cost += m * (schedule.poll_ms(n, 5_000) + 700 * u64::from(n));
                polls += m * u64::from(n);
            }
            // Less the first poll's price, as `of` leaves it out.
            (cost - 700 * costs.survival[0], polls)
        };
        for wait in [1, 4, 13, 60] {
            for seconds in [
                Seconds { wait, after: 0, until: 0 },
                Seconds { wait, after: 1, until: wait + 9 },
                Seconds { wait, after: 2, until: wait + 30 },
            ] {
                assert_eq!(costs.of(seconds), walk(seconds), "{seconds:?}");
            }
        }
    }
}
