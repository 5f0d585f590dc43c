//! Learned solve-times models for the simulated solves: per type, one model per [`SHAPES`] row,
//! taught as a host teaches one (engine solves against a clean upstream whose answer is ready at
//! the shape's times, each finished solve observed). Built once per run, the same every run, so
//! `--only` replays a solve with the model it had.

use captchaai_engine::{ApiKey, Config, Output, RequestKind, Solution, Solve, SolveTimes, Task};

use crate::oracle::{TYPES, TypeRow};
use crate::rng::Rng;

/// A spread of solve times to teach: `solves` solves, ready uniformly in `early` (ms after the
/// submit), except `late_permille` of them, ready in `late`. Times are capped at three quarters
/// of the type's deadline, so that every taught solve finishes.
pub struct Shape {
    pub name: &'static str,
    pub solves: u32,
    pub early: (u64, u64),
    pub late: (u64, u64),
    pub late_permille: u64,
}

/// What the models are taught: too few solves for a learned wait (the table applies), faster
/// and slower than the table, the fake upstream's own 3-45 s, and two groups (a gap).
pub const SHAPES: &[Shape] = &[
    Shape { name: "too few", solves: 12, early: (3_000, 45_000), late: (0, 0), late_permille: 0 },
    Shape { name: "fast", solves: 60, early: (2_000, 8_000), late: (0, 0), late_permille: 0 },
    Shape { name: "as upstream", solves: 60, early: (3_000, 45_000), late: (0, 0), late_permille: 0 },
    Shape { name: "slow", solves: 60, early: (50_000, 90_000), late: (0, 0), late_permille: 0 },
    Shape { name: "two groups", solves: 60, early: (2_000, 5_000), late: (40_000, 55_000), late_permille: 400 },
    Shape { name: "stragglers", solves: 60, early: (3_000, 4_000), late: (50_000, 60_000), late_permille: 100 },
];

/// The models, by type (the order of [`TYPES`]) and shape.
pub struct Models(Vec<Vec<SolveTimes>>);

impl Models {
    pub fn new() -> Models {
        Models(TYPES.iter().map(|ty| SHAPES.iter().map(|shape| teach(ty, shape)).collect()).collect())
    }

    /// The model of `ty` taught `SHAPES[shape]`.
    pub fn get(&self, ty: &TypeRow, shape: usize) -> &SolveTimes {
        let row = TYPES.iter().position(|t| t.name == ty.name).unwrap_or(0);
        &self.0[row][shape % SHAPES.len()]
    }
}

impl Default for Models {
    fn default() -> Models {
        Models::new()
    }
}

fn teach(ty: &TypeRow, shape: &Shape) -> SolveTimes {
    let mut model = SolveTimes::new(ty.name).expect("a simulated type");
    let mut r = Rng::new(0x7EAC_4000 ^ shape.solves as u64 ^ shape.early.0);
    let cap = ty.deadline_ms * 3 / 4;
    for i in 0..u64::from(shape.solves) {
        let (lo, hi) = if r.below(1_000) < shape.late_permille { shape.late } else { shape.early };
        // A minute apart, as a host creates them (whether a solve explores is a hash of when).
        if let Some(solution) = drive(ty, &model, i * 60_000, r.range(lo, hi).min(cap)) {
            model.observe(&solution);
        }
    }
    model
}

/// One solve of `ty` created with `model` at `start`, against an upstream that accepts the task
/// and answers from `ready_ms` after it on.
fn drive(ty: &TypeRow, model: &SolveTimes, start: u64, ready_ms: u64) -> Option<Solution> {
    let task = Task::from_json(ty.task_json).ok()?;
    let key = ApiKey::new("TEACHER0123456789abcdefghijklmno").ok()?;
    let mut solve = Solve::with_solve_times(task, key, &Config::default(), model, start).ok()?;
    let mut output = solve.poll_output(start).ok()?;
    let ready_ms = start + ready_ms;
    for _ in 0..100 {
        let Output::Send(request) = output else {
            return match output {
                Output::Solved(solution) => Some(solution),
                _ => None,
            };
        };
        let body: &[u8] = match request.kind {
            RequestKind::Submit => br#"{"status":1,"request":"7"}"#,
            _ if request.at >= ready_ms => br#"{"status":1,"request":"1234"}"#,
            _ => br#"{"status":0,"request":"CAPCHA_NOT_READY"}"#,
        };
        output = solve.handle_response(request.at, request.id, 200, body).ok()?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shapes give what they are for: no learned wait from too few solves, a first wait no
    /// later than the table's (or the fast shape's slowest answer, 8 s, for a type whose table
    /// polls sooner) for the fast shape and, where the deadline allows, one after the table's
    /// for the slow shape, and a longer wait for two groups.
    #[test]
    fn the_shapes_teach_what_they_are_named_for() {
        let models = Models::new();
        for ty in TYPES {
            let first_wait = |shape: usize| models.get(ty, shape).first_wait_ms();
            assert_eq!(first_wait(0), None, "{}", ty.name);
            let fast = first_wait(1).is_some_and(|w| w <= ty.first_wait_ms.max(8_000));
            assert!(fast, "{}: {:?}", ty.name, first_wait(1));
            if ty.deadline_ms >= 120_000 {
                assert!(first_wait(3).is_some_and(|w| w > ty.first_wait_ms), "{}: {:?}", ty.name, first_wait(3));
            }
            let two_groups = models.get(ty, 4).schedule(&Config::default(), 0).map(|(_, main)| main.gap);
            assert!(matches!(two_groups, Some(Some(_))), "{}: {two_groups:?}", ty.name);
        }
    }
}
