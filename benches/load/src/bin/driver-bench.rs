//! Load benchmark: many concurrent in-flight solves through the engine component in one process,
//! against the emulator (time-scaled). Reports engine CPU per solve through the component,
//! engine memory per in-flight solve, instantiation time, and component load time cold vs cached.
//!
//! `cargo run --release -p captchaai-benches --bin driver-bench -- --solves 100000`

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use captchaai::{Clock, Config, EngineHost, Runner, RunnerOptions};
use captchaai_emulator::{CaptchaKind, Emulator, EmulatorConfig};
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Solves started at once.
    #[arg(long, default_value_t = 100_000)]
    solves: usize,
    /// Time runs this many times faster (engine clock and emulator alike).
    #[arg(long, default_value_t = 2.0)]
    time_scale: f64,
    /// Emulator solve time range, virtual ms (Turnstile: first poll at 13 s, then every 5 s, so
    /// three not-ready polls and the answer at 28 s).
    #[arg(long, default_value_t = 24_000)]
    solve_ms_min: u64,
    #[arg(long, default_value_t = 27_000)]
    solve_ms_max: u64,
    /// HTTP requests in flight at once.
    #[arg(long, default_value_t = 512)]
    max_in_flight: usize,
    /// Keep snapshots after every change (trap recovery); off measures the engine alone.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    checkpoints: bool,
    /// Only the canned solve through the component, `--canned N` times (no emulator, no load
    /// run): for instruction counts (`valgrind --tool=callgrind`) and build variants.
    #[arg(long)]
    canned: Option<usize>,
    /// With `--canned`: how many snapshots to time after the solves (default: as many).
    #[arg(long)]
    canned_snapshots: Option<usize>,
    /// With `--canned`: how many solves created with a warmed solve-times model to time, and
    /// how many `observe` calls (default: as many each; 0 leaves a part out of an instruction
    /// count).
    #[arg(long)]
    canned_with_model: Option<usize>,
    #[arg(long)]
    canned_observes: Option<usize>,
    /// With `--canned`: how many cycles of a host's steady state to time: a solve created with
    /// the model the last `observe` changed (so it plans first), then an `observe` (its schedule
    /// read back from that plan).
    #[arg(long)]
    canned_cycles: Option<usize>,
    /// Another engine component to measure (default: the one built into the `captchaai` crate).
    #[arg(long, env = "CAPTCHAAI_ENGINE_WASM")]
    wasm: Option<PathBuf>,
}

impl Args {
    fn engine(&self, cache_dir: Option<&Path>) -> Result<EngineHost> {
        match &self.wasm {
            Some(wasm) => EngineHost::load(wasm, cache_dir),
            None => EngineHost::embedded(cache_dir),
        }
    }
}

const KEY: &str = "0123456789abcdef0123456789abcdef";

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(rounds) = args.canned {
        let parts = Canned {
            rounds,
            with_model: args.canned_with_model.unwrap_or(rounds),
            observes: args.canned_observes.unwrap_or(rounds),
            cycles: args.canned_cycles.unwrap_or(rounds),
            snapshots: args.canned_snapshots.unwrap_or(rounds),
        };
        return canned(&args.engine(None)?, parts);
    }
    let cache = std::env::temp_dir().join(format!("captchaai-bench-cache-{}", std::process::id()));

    let cold = args.engine(Some(&cache)).context("load the component")?;
    let cached = args.engine(Some(&cache))?;
    if !cold.load.compiled || cached.load.compiled {
        bail!("the cache did not work as expected");
    }
    println!(
        "component load: cold (compile) {:.1} ms, cached (deserialize) {:.2} ms",
        ms(cold.load.duration),
        ms(cached.load.duration)
    );
    let _ = std::fs::remove_dir_all(&cache);

    let rounds = 200;
    let started = Instant::now();
    for _ in 0..rounds {
        drop(cached.instantiate(64 << 20)?);
    }
    println!("instantiation (store + instance): {:.1} µs", started.elapsed().as_secs_f64() * 1e6 / rounds as f64);

    canned(
        &cached,
        Canned { rounds: 20_000, with_model: 20_000, observes: 20_000, cycles: 20_000, snapshots: 20_000 },
    )?;

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(load(cached, &args))
}

async fn load(host: EngineHost, args: &Args) -> Result<()> {
    let emulator = Emulator::start(
        EmulatorConfig::default()
            .with_time_scale(args.time_scale)
            .with_account(KEY, u32::try_from(args.solves + 10)?)
            .with_solve_time(CaptchaKind::Turnstile, args.solve_ms_min, args.solve_ms_max)
            .with_retention_ms(3_600_000),
    )
    .await?;
    let clock = Clock::scaled(args.time_scale);
    let mut options = RunnerOptions::new(clock, args.max_in_flight);
    options.checkpoints = args.checkpoints;
    let runner = Arc::new(Runner::new(host, options)?);
    let baseline = runner.memory().0;
    let config = Config { base_url: Some(emulator.base_url()), deadline_ms: Some(600_000), ..Config::default() };
    let task =
        r#"{"type":"turnstile","sitekey":"0x4AAAAAAABkMYinukE8nzY","pageurl":"https://portal.example.com/export"}"#;
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut handles = Vec::with_capacity(args.solves);
    for _ in 0..args.solves {
        let (runner, config, done) = (runner.clone(), config.clone(), done.clone());
        handles.push(tokio::spawn(async move {
            let report = runner.solve(task, KEY, &config).await;
            done.fetch_add(1, Ordering::Relaxed);
            report
        }));
    }
    // Sample the peak of solves in flight and the engine's memory then.
    let (mut peak_solves, mut peak_memory) = (0, baseline);
    while done.load(Ordering::Relaxed) < args.solves {
        let (memory, in_flight) = runner.memory();
        if in_flight > peak_solves {
            (peak_solves, peak_memory) = (in_flight, memory);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut solved = 0;
    let mut requests = 0u64;
    for handle in handles {
        let report = handle.await??;
        requests += u64::from(report.requests);
        solved += usize::from(report.outcome.is_ok());
    }
    let wall = started.elapsed();
    let stats = runner.stats();
    let per_solve = |ns: u64| ns as f64 / 1_000.0 / args.solves as f64;
    println!(
        "solves: {} started, {solved} solved, {requests} HTTP requests ({:.1} per solve), {:.1} s wall",
        args.solves,
        requests as f64 / args.solves as f64,
        wall.as_secs_f64()
    );
    println!(
        "engine time per solve through the component (inside engine calls, under load): {:.2} µs in {:.1} calls",
        per_solve(stats.engine_ns),
        stats.engine_calls as f64 / args.solves as f64
    );
    if args.checkpoints {
        println!(
            "checkpoint snapshots per solve: {:.1}, {:.2} µs",
            stats.checkpoints as f64 / args.solves as f64,
            per_solve(stats.checkpoint_ns)
        );
    }
    println!(
        "engine memory: peak {peak_solves} solves in flight, linear memory {:.1} MiB ({:.0} bytes per in-flight solve)",
        peak_memory as f64 / (1 << 20) as f64,
        (peak_memory - baseline) as f64 / peak_solves.max(1) as f64
    );
    Ok(())
}

/// How many times `--canned` times each part.
struct Canned {
    rounds: usize,
    with_model: usize,
    observes: usize,
    cycles: usize,
    snapshots: usize,
}

/// A full solve through the component with canned replies and no IO (the native criterion
/// bench's scenario, from the `type_recaptcha_v2` golden vector): submit, three not-ready
/// polls, the answer.
fn canned(host: &EngineHost, Canned { rounds, with_model, observes, cycles, snapshots }: Canned) -> Result<()> {
    use captchaai::{HttpResponse, Output};
    let mut instance = host.instantiate(64 << 20)?;
    // The upstream's side comes from the golden vector of the same scenario.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vectors/type_recaptcha_v2.json");
    let vector: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let task = vector["task"].to_string();
    // Replies as a host holds them once read off the network (building them is not engine work).
    let replies: Vec<HttpResponse> = vector["script"]
        .as_array()
        .context("a script")?
        .iter()
        .map(|entry| entry["reply"]["body"].as_str().map(|body| HttpResponse { status: 200, body: body.to_owned() }))
        .collect::<Option<_>>()
        .context("a reply body")?;
    let config = Config::default();
    let mut calls = 0;
    let started = Instant::now();
    for _ in 0..rounds {
        let solve = instance.create(&task, KEY, &config, 0)?.map_err(|f| anyhow::anyhow!(f.message))?;
        let mut replies = replies.iter();
        calls += 2; // create, poll-output
        let mut output = instance.poll_output(solve, 0)?.map_err(|m| anyhow::anyhow!("{m:?}"))?;
        loop {
            match output {
                Output::Send(request) => {
                    let reply = replies.next().context("script")?;
                    calls += 1;
                    output = instance
                        .handle_response(solve, request.at, request.id, reply)?
                        .map_err(|m| anyhow::anyhow!("{m:?}"))?;
                }
                Output::Solved(_) => break,
                Output::Failed(f) => bail!("{}", f.message),
            }
        }
        instance.drop_solve(solve)?;
    }
    let per = started.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    println!("full solve through the component, canned replies: {per:.2} µs ({} calls)", calls / rounds);
    // The same solve created with a solve-times model warmed on 1,000 solves ready from 1 s to
    // 113 s after the submit (spread by a stride, as the polling bench teaches its models), each
    // polled on the schedule the model gave it: a model remembering as many intervals as it
    // keeps. Then `observe` alone, of those solutions in turn (each reads the schedule back and
    // re-estimates).
    let times = instance.times_create("recaptcha_v2")?.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let (not_ready, answer) = (&replies[1], &replies[replies.len() - 1]);
    let mut lesson = Vec::new();
    for i in 0..1_000u64 {
        let (start, ready) = (i * 1_000_000, 1_000 + (i * 7_919) % 112_000);
        let solve =
            instance.create_with_times(&task, KEY, &config, start, times)?.map_err(|f| anyhow::anyhow!(f.message))?;
        let mut output = instance.poll_output(solve, start)?.map_err(|m| anyhow::anyhow!("{m:?}"))?;
        let mut submitted = false;
        let solution = loop {
            match output {
                Output::Send(request) => {
                    let reply = match (submitted, request.at >= start + ready) {
                        (false, _) => &replies[0],
                        (true, true) => answer,
                        (true, false) => not_ready,
                    };
                    submitted = true;
                    output = instance
                        .handle_response(solve, request.at, request.id, reply)?
                        .map_err(|m| anyhow::anyhow!("{m:?}"))?;
                }
                Output::Solved(solution) => break solution,
                Output::Failed(f) => bail!("{}", f.message),
            }
        };
        instance.drop_solve(solve)?;
        instance.times_observe(times, &solution)?;
        lesson.push(solution);
    }
    let solve_with_model = |instance: &mut captchaai::EngineInstance| -> Result<()> {
        let solve =
            instance.create_with_times(&task, KEY, &config, 0, times)?.map_err(|f| anyhow::anyhow!(f.message))?;
        let mut replies = replies.iter();
        let mut output = instance.poll_output(solve, 0)?.map_err(|m| anyhow::anyhow!("{m:?}"))?;
        loop {
            match output {
                Output::Send(request) => {
                    let reply = replies.next().context("script")?;
                    output = instance
                        .handle_response(solve, request.at, request.id, reply)?
                        .map_err(|m| anyhow::anyhow!("{m:?}"))?;
                }
                Output::Solved(_) => break,
                Output::Failed(f) => bail!("{}", f.message),
            }
        }
        instance.drop_solve(solve)?;
        Ok(())
    };
    let first_wait = instance.times_first_wait_ms(times)?.context("a warmed model gives a first wait")?;
    let started = Instant::now();
    for _ in 0..with_model {
        solve_with_model(&mut instance)?;
    }
    let per = started.elapsed().as_secs_f64() * 1e6 / with_model.max(1) as f64;
    println!("the same solve created with a warmed solve-times model (first wait {first_wait} ms): {per:.2} µs");
    let started = Instant::now();
    for solution in lesson.iter().cycle().take(observes) {
        instance.times_observe(times, solution)?;
    }
    let per = started.elapsed().as_secs_f64() * 1e6 / observes.max(1) as f64;
    println!("solve-times observe through the component, one after another (each re-plans to read back): {per:.2} µs");
    // A host's steady state: each solve created with the model the last `observe` changed, then
    // an `observe`, which reads its schedule back from the plan that creation made.
    let (mut creating, mut observing) = (Duration::ZERO, Duration::ZERO);
    for solution in lesson.iter().cycle().take(cycles) {
        let started = Instant::now();
        solve_with_model(&mut instance)?;
        let between = Instant::now();
        instance.times_observe(times, solution)?;
        (creating, observing) = (creating + (between - started), observing + between.elapsed());
    }
    let per = |total: Duration| total.as_secs_f64() * 1e6 / cycles.max(1) as f64;
    println!(
        "steady state: the solve created with a model the last observe changed: {:.2} µs; then observe: {:.2} µs",
        per(creating),
        per(observing)
    );
    // A checkpoint of that solve after its submit was answered (what the driver keeps).
    let solve = instance.create(&task, KEY, &config, 0)?.map_err(|f| anyhow::anyhow!(f.message))?;
    let Output::Send(submit) = instance.poll_output(solve, 0)?.map_err(|m| anyhow::anyhow!("{m:?}"))? else {
        bail!("expected the submit")
    };
    instance.handle_response(solve, 0, submit.id, &replies[0])?.map_err(|m| anyhow::anyhow!("{m:?}"))?;
    let started = Instant::now();
    let mut bytes = 0;
    for _ in 0..snapshots {
        bytes = instance.snapshot_state(solve)?.len();
    }
    let per = started.elapsed().as_secs_f64() * 1e6 / snapshots.max(1) as f64;
    println!("checkpoint (snapshot-state) through the component ({bytes} bytes): {per:.2} µs");
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}
