//! `captchaai solve` and `captchaai threads`: run the engine component against CaptchaAI (or the
//! emulator) from the command line. The key comes from `CAPTCHAAI_KEY` and is never printed.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use captchaai::{Answer, Clock, Config, EngineHost, Failure, FailureClass, Runner, RunnerOptions, SolveReport};

/// Where the service is and how to run the engine (shared by `solve` and `threads`).
#[derive(Args, Clone)]
pub struct EngineArgs {
    /// The service's base URL (default: $CAPTCHAAI_BASE_URL, else `https://ocr.captchaai.com`).
    #[arg(long, env = "CAPTCHAAI_BASE_URL")]
    pub base_url: Option<String>,
    /// Another engine component to run (default: the one built into this binary).
    #[arg(long)]
    pub wasm: Option<PathBuf>,
    /// Keep the compiled component here so later runs start fast (default:
    /// $XDG_CACHE_HOME/captchaai or ~/.cache/captchaai).
    #[arg(long, env = "CAPTCHAAI_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Run time this many times faster (only against an emulator started with the same scale),
    /// 0.01 to 10000.
    #[arg(long, default_value_t = 1.0, value_parser = time_scale)]
    pub time_scale: f64,
    /// At most this many HTTP requests in flight (1 to 65536).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub max_in_flight: u32,
}

impl EngineArgs {
    fn runner(&self) -> Result<Runner> {
        let cache_dir = self.cache_dir.clone().or_else(user_cache_dir);
        let host = match &self.wasm {
            Some(wasm) => EngineHost::load(wasm, cache_dir.as_deref())?,
            None => EngineHost::embedded(cache_dir.as_deref())?,
        };
        let clock = Clock::scaled(self.time_scale);
        // Adaptive polling: one solve-times model per captcha type, learned from the solves.
        let options = RunnerOptions { adaptive: true, ..RunnerOptions::new(clock, self.max_in_flight as usize) };
        Runner::new(host, options)
    }

    fn config(&self, deadline_ms: Option<u64>, poll_cost_ms: Option<u64>) -> Config {
        Config { base_url: self.base_url.clone(), deadline_ms, poll_cost_ms, ..Config::default() }
    }
}

/// `$XDG_CACHE_HOME/captchaai`, else `~/.cache/captchaai`.
fn user_cache_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).filter(|p| p.is_absolute());
    let base = xdg.or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("captchaai"))
}

/// `--time-scale`: a finite number from 0.01 to 10000 (beyond, timers overflow or never end).
fn time_scale(text: &str) -> Result<f64, String> {
    let scale: f64 = text.parse().map_err(|_| format!("{text:?} is not a number"))?;
    if (0.01..=10_000.0).contains(&scale) { Ok(scale) } else { Err("must be from 0.01 to 10000".into()) }
}

fn api_key() -> Result<String> {
    match std::env::var("CAPTCHAAI_KEY") {
        Ok(key) => Ok(key),
        Err(std::env::VarError::NotPresent) => bail!("set CAPTCHAAI_KEY to your CaptchaAI API key"),
        // The error's own message would print the value.
        Err(std::env::VarError::NotUnicode(_)) => bail!("CAPTCHAAI_KEY is not valid UTF-8 (its value is not shown)"),
    }
}

/// Flags of `captchaai solve`.
#[derive(Args)]
pub struct SolveArgs {
    /// Service and engine options.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// One task as JSON, e.g. '{"type":"turnstile","sitekey":"0x4AAA...","pageurl":"https://..."}'.
    #[arg(long, conflicts_with_all = ["captcha_type", "batch"])]
    pub task: Option<String>,
    /// One task by type, with `--field name=value` for its fields.
    #[arg(long = "type", conflicts_with = "batch")]
    pub captcha_type: Option<String>,
    /// A task field (`name=value`; numbers and true/false are sent as such). Repeatable.
    #[arg(long = "field", value_name = "NAME=VALUE")]
    pub fields: Vec<String>,
    /// A file of tasks, one JSON object per line, solved concurrently under the thread gate.
    #[arg(long)]
    pub batch: Option<PathBuf>,
    /// Threads of the plan to leave unused (for other clients of the key).
    #[arg(long, default_value_t = 1)]
    pub reserve: u64,
    /// Overall deadline per solve, ms (default: per type).
    #[arg(long)]
    pub deadline_ms: Option<u64>,
    /// What one poll is worth in ms of waiting, to adaptive polling (0 to 60000; default: the
    /// engine's, 250). The engine checks the range.
    #[arg(long)]
    pub poll_cost_ms: Option<u64>,
    /// Adaptive polling's learned solve times: loaded at the start when FILE exists (a JSON
    /// object, captcha type -> the engine's solve-times model text), saved there at the end.
    #[arg(long, value_name = "FILE")]
    pub solve_times: Option<PathBuf>,
}

/// Flags of `captchaai threads`.
#[derive(Args)]
pub struct ThreadsArgs {
    /// Service and engine options.
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Prints the plan's threads and how many are busy.
pub async fn threads(args: ThreadsArgs) -> Result<()> {
    let key = api_key()?;
    let runner = args.engine.runner()?;
    match runner.threads_info(&key, &args.engine.config(None, None)).await? {
        Ok(info) => {
            println!("plan threads: {}, busy: {}, free: {}", info.threads, info.working_threads, info.free);
            Ok(())
        }
        Err(failure) => bail!("{}", describe(&failure)),
    }
}

fn describe(f: &Failure) -> String {
    let class = match f.class {
        FailureClass::Permanent => "permanent",
        FailureClass::Transient => "transient",
        FailureClass::Unsolvable => "unsolvable",
    };
    let retry = f.retry_after_ms.map(|ms| format!(" (retry after {} s)", ms.div_ceil(1000))).unwrap_or_default();
    format!("{} [{class}]: {}{retry}", f.code, f.message)
}

fn answer_text(answer: &Answer) -> &str {
    match answer {
        Answer::Text(text) | Answer::Json(text) => text,
    }
}

/// Builds task JSON from `--type` and `--field` flags (values that parse as JSON scalars are
/// kept as such; everything else is a string).
fn task_from_flags(captcha_type: &str, fields: &[String]) -> Result<String> {
    let mut object = serde_json::Map::new();
    object.insert("type".into(), captcha_type.into());
    for field in fields {
        let (name, value) = field.split_once('=').with_context(|| format!("--field {field:?} is not NAME=VALUE"))?;
        let value = match serde_json::from_str::<serde_json::Value>(value) {
            Ok(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => v,
            _ => serde_json::Value::String(value.to_owned()),
        };
        object.insert(name.to_owned(), value);
    }
    Ok(serde_json::Value::Object(object).to_string())
}

/// Solves one task or a batch; prints answers on stdout (one line each, in input order for a
/// batch: `ok<TAB>answer` or `error<TAB>code<TAB>class<TAB>message`).
pub async fn solve(args: SolveArgs) -> Result<()> {
    let key = api_key()?;
    let config = args.engine.config(args.deadline_ms, args.poll_cost_ms);
    let tasks: Vec<String> = match (&args.task, &args.captcha_type, &args.batch) {
        (Some(task), _, _) => vec![task.clone()],
        (None, Some(kind), _) => vec![task_from_flags(kind, &args.fields)?],
        (None, None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("reading {}", path.display()))?
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(str::to_owned)
            .collect(),
        (None, None, None) => bail!("give --task, --type with --field, or --batch"),
    };
    let runner = Arc::new(args.engine.runner()?);
    if let Some(path) = &args.solve_times {
        load_solve_times(&runner, path)?;
    }
    if args.batch.is_none() {
        let report = runner.solve(&tasks[0], &key, &config).await?;
        if let Ok(solution) = &report.outcome {
            println!("{}", answer_text(&solution.answer));
            if let Some(ua) = &solution.user_agent {
                eprintln!("user agent: {ua}");
            }
        }
        // After the answer is out: a file that cannot be written must not cost a paid solve.
        if let Some(path) = &args.solve_times
            && let Err(e) = save_solve_times(&runner, path)
        {
            eprintln!("warning: the solve-times models were not saved: {e:#}");
        }
        return report.outcome.map(|_| ()).map_err(|failure| anyhow!("{}", describe(&failure)));
    }
    run_batch(runner, &key, &config, tasks, args.reserve, args.solve_times.as_deref()).await
}

/// Loads the solve-times models saved in `path` (nothing when it does not exist or is empty).
fn load_solve_times(runner: &Runner, path: &Path) -> Result<()> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading --solve-times {}", path.display())),
    };
    if text.trim().is_empty() {
        return Ok(());
    }
    let models: BTreeMap<String, String> = serde_json::from_str(&text).with_context(|| {
        format!("--solve-times {}: not a JSON object of captcha type to model text", path.display())
    })?;
    for (kind, model) in &models {
        if let Err(e) = runner.set_solve_times(kind, model)? {
            bail!("--solve-times {}: the model of `{kind}` is refused: {}", path.display(), describe_times_error(&e));
        }
    }
    Ok(())
}

/// Saves every model to `path` atomically, as the compiled-component cache is written: a
/// temporary file of this run's own beside it, renamed over it (runs saving at once: the last wins).
fn save_solve_times(runner: &Runner, path: &Path) -> Result<()> {
    let mut text = serde_json::to_string_pretty(&runner.solve_times())?;
    text.push('\n');
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir).with_context(|| format!("writing in {}", dir.display()))?;
    std::io::Write::write_all(&mut file, text.as_bytes()).with_context(|| format!("writing in {}", dir.display()))?;
    file.persist(path).with_context(|| format!("saving --solve-times {}", path.display()))?;
    Ok(())
}

fn describe_times_error(e: &captchaai::SolveTimesError) -> String {
    match e {
        captchaai::SolveTimesError::Malformed(why) => format!("not JSON ({why})"),
        captchaai::SolveTimesError::Foreign => "not a captchaai-engine solve-times model".into(),
        captchaai::SolveTimesError::UnsupportedVersion(v) => format!("version {v} is not supported"),
        captchaai::SolveTimesError::Invalid(why) => format!("invalid ({why})"),
    }
}

/// `learned first wait: turnstile 6.0 s after 25 solves, recaptcha_v2 table (3 observations)`
/// (the engine decides when a model has seen enough).
fn first_waits_line(runner: &Runner) -> Result<Option<String>> {
    let waits = runner.first_waits()?;
    if waits.is_empty() {
        return Ok(None);
    }
    let parts: Vec<String> = waits
        .iter()
        .map(|(kind, wait)| match wait.first_wait_ms {
            Some(ms) => format!("{kind} {:.1} s after {} solves", ms as f64 / 1000.0, wait.observations),
            None => format!("{kind} table ({} observations)", wait.observations),
        })
        .collect();
    Ok(Some(format!("learned first wait: {}", parts.join(", "))))
}

async fn run_batch(
    runner: Arc<Runner>,
    key: &str,
    config: &Config,
    tasks: Vec<String>,
    reserve: u64,
    solve_times: Option<&Path>,
) -> Result<()> {
    let plan = match runner.threads_info(key, config).await? {
        Ok(info) => info.threads,
        Err(failure) => bail!("threadsinfo: {}", describe(&failure)),
    };
    let gate = match runner.gate(plan, reserve)? {
        Ok(gate) => Arc::new(gate),
        Err(failure) => bail!("{}", describe(&failure)),
    };
    eprintln!("{} tasks, plan of {plan} threads, {} at once", tasks.len(), gate.capacity()?);
    let progress = ProgressBar::new(tasks.len() as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} solves {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut handles = Vec::with_capacity(tasks.len());
    for task in tasks {
        let (runner, gate, key, config, progress) =
            (runner.clone(), gate.clone(), key.to_owned(), config.clone(), progress.clone());
        handles.push(tokio::spawn(async move {
            let ticket = gate.enter().await?;
            let report = runner.solve(&task, &key, &config).await;
            gate.leave(ticket)?;
            progress.inc(1);
            report
        }));
    }
    let mut reports: Vec<SolveReport> = Vec::with_capacity(handles.len());
    for handle in handles {
        reports.push(handle.await??);
    }
    progress.finish_and_clear();
    let mut stdout = std::io::stdout().lock();
    let (mut solved, mut unsolvable, mut permanent, mut transient) = (0, 0, 0, 0);
    let mut seconds: Vec<f64> = Vec::new();
    for report in &reports {
        match &report.outcome {
            Ok(solution) => {
                solved += 1;
                seconds.push(solution.elapsed_ms as f64 / 1000.0);
                writeln!(stdout, "ok\t{}", answer_text(&solution.answer))?;
            }
            Err(f) => {
                match f.class {
                    FailureClass::Unsolvable => unsolvable += 1,
                    FailureClass::Permanent => permanent += 1,
                    FailureClass::Transient => transient += 1,
                }
                writeln!(stdout, "error\t{}", describe(f).replacen(" [", "\t", 1).replacen("]: ", "\t", 1))?;
            }
        }
    }
    seconds.sort_by(f64::total_cmp);
    let pct =
        |p: f64| seconds.get(((seconds.len() as f64 * p).ceil() as usize).saturating_sub(1)).copied().unwrap_or(0.0);
    let total = reports.len().max(1);
    eprintln!(
        "solved {solved}, unsolvable {unsolvable}, permanent {permanent}, transient {transient}; \
         unsolvable ratio {:.3}; solve seconds p50 {:.1}, p95 {:.1}",
        unsolvable as f64 / total as f64,
        pct(0.50),
        pct(0.95)
    );
    if let Some(line) = first_waits_line(&runner)? {
        eprintln!("{line}");
    }
    if let Some(path) = solve_times {
        save_solve_times(&runner, path)?;
    }
    let failed = reports.len() - solved;
    if failed > 0 {
        bail!("{failed} of {} tasks failed (their lines say why)", reports.len());
    }
    Ok(())
}
