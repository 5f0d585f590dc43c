//! A full solve natively: submit, three not-ready polls, the answer. The host work (HTTP, sleeping)
//! is not included: replies are fed back immediately with virtual times.

use std::hint::black_box;

use captchaai_engine::{ApiKey, Config, Output, Solve, Task};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

const KEY: &str = "0123456789abcdef0123456789abcdef";
const TASK: &str = r#"{"type":"recaptcha_v2","sitekey":"6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-","pageurl":"https://portal.example.com/export"}"#;
const REPLIES: [&[u8]; 5] = [
    br#"{"status":1,"request":73846221}"#,
    br#"{"status":0,"request":"CAPCHA_NOT_READY"}"#,
    br#"{"status":0,"request":"CAPCHA_NOT_READY"}"#,
    br#"{"status":0,"request":"CAPCHA_NOT_READY"}"#,
    br#"{"status":1,"request":"03AGdBq24PBCbwiDRaS_MJ7Zxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}"#,
];

/// Drives a solve to its end as a host does (one `poll_output`, then one `handle_response` per
/// request, each returning the next output); returns the number of polls.
fn drive(mut solve: Solve) -> u32 {
    let mut replies = REPLIES.iter();
    let mut output = solve.poll_output(0).unwrap();
    loop {
        match output {
            Output::Send(request) => {
                output = solve.handle_response(request.at, request.id, 200, replies.next().unwrap()).unwrap()
            }
            Output::Solved(solution) => return solution.polls,
            Output::Failed(failure) => panic!("{failure}"),
        }
    }
}

fn benches(c: &mut Criterion) {
    let task = Task::from_json(TASK).unwrap();
    let key = ApiKey::new(KEY).unwrap();
    let config = Config::default();
    assert_eq!(drive(Solve::new(task.clone(), key.clone(), &config, 0).unwrap()), 4);

    c.bench_function("full solve (validated task): submit + 3 not-ready polls + ready", |b| {
        b.iter(|| drive(Solve::new(black_box(task.clone()), key.clone(), &config, 0).unwrap()))
    });
    c.bench_function("full solve from task JSON and key text", |b| {
        b.iter(|| drive(Solve::from_json(black_box(TASK), KEY, &config, 0).unwrap()))
    });

    let mut mid = Solve::new(task.clone(), key.clone(), &config, 0).unwrap();
    let Output::Send(submit) = mid.poll_output(0).unwrap() else { unreachable!() };
    mid.handle_response(0, submit.id, 200, REPLIES[0]).unwrap();
    let snapshot = mid.snapshot();
    println!("snapshot of an in-flight reCAPTCHA solve: {} bytes", snapshot.len());
    c.bench_function("snapshot", |b| b.iter(|| black_box(&mid).snapshot()));
    c.bench_function("restore", |b| b.iter(|| Solve::restore(black_box(&snapshot), KEY).unwrap()));
    // A solve at its first poll, made outside the timing; timed: feeding it a not-ready reply.
    let at_poll = || {
        let mut solve = Solve::new(task.clone(), key.clone(), &config, 0).unwrap();
        let Output::Send(submit) = solve.poll_output(0).unwrap() else { unreachable!() };
        let Output::Send(poll) = solve.handle_response(0, submit.id, 200, REPLIES[0]).unwrap() else { unreachable!() };
        (solve, poll.id, poll.at)
    };
    c.bench_function("handle a not-ready reply (parse, schedule and return the next poll)", |b| {
        b.iter_batched_ref(
            at_poll,
            |(solve, id, t)| solve.handle_response(*t, *id, 200, black_box(REPLIES[1])).unwrap(),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(engine, benches);
criterion_main!(engine);
