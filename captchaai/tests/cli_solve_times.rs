//! `captchaai solve --batch` with adaptive polling, and how failures end a run, against the
//! emulator: the batch keeps one solve-times model per captcha type, prints what each learned,
//! and `--solve-times FILE` saves the models and starts a later batch from them. Time runs 10x
//! faster on both sides: not 50x, since an answer found at the first poll counts as late (and
//! stops the learning) past the table's first wait plus 2.5 s, which at 50x is only 50 ms of
//! real latency on a loaded machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use captchaai_emulator::{CaptchaKind, Emulator, EmulatorConfig};

const SCALE: f64 = 10.0;
const KEY: &str = "c1150000000000000000000000000001";
const TURNSTILE: &str =
    r#"{"type":"turnstile","sitekey":"0x4AAAAAAAB-cli-adaptive","pageurl":"https://portal.example.com/login"}"#;

/// Turnstile's first wait in the engine's type table.
fn table_first_wait_ms() -> u64 {
    captchaai_engine::task_types().find(|t| t.name() == "turnstile").expect("turnstile in the table").first_wait_ms()
}

/// An emulator whose Turnstile answers come in 3-4 s (virtual), well before the table's first
/// poll; a plan of 6 threads, so a batch (reserve 1) runs 5 solves at a time, in waves.
async fn emulator() -> Emulator {
    let config = EmulatorConfig::default().with_time_scale(SCALE).with_seed(11).with_account(KEY, 6).with_solve_time(
        CaptchaKind::Turnstile,
        3_000,
        4_000,
    );
    Emulator::start(config).await.expect("emulator")
}

/// A fresh scratch directory under the target directory.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-solve-times-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn batch_file(dir: &Path, tasks: usize) -> PathBuf {
    let path = dir.join(format!("tasks-{tasks}.jsonl"));
    std::fs::write(&path, format!("{TURNSTILE}\n").repeat(tasks)).unwrap();
    path
}

/// Runs `captchaai solve` with `args` against the emulator (off the async runtime, which serves it).
async fn cli(emulator: &Emulator, dir: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_captchaai"));
    command
        .arg("solve")
        .args(["--base-url", &emulator.base_url(), "--time-scale", &SCALE.to_string()])
        .arg("--cache-dir")
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-component-cache"))
        .args(args)
        .env("CAPTCHAAI_KEY", KEY)
        .current_dir(dir);
    tokio::task::spawn_blocking(move || command.output().expect("run captchaai")).await.unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The `learned first wait:` line's entry for Turnstile: (first wait ms or None for the
/// table, observations).
fn learned(output: &Output) -> (Option<u64>, u32) {
    let err = stderr(output);
    let line = err.lines().find_map(|l| l.strip_prefix("learned first wait: ")).unwrap_or_else(|| panic!("{err}"));
    let entry = line.split(", ").find_map(|e| e.strip_prefix("turnstile ")).unwrap_or_else(|| panic!("{line}"));
    if let Some(rest) = entry.strip_prefix("table (") {
        return (None, rest.trim_end_matches(" observations)").parse().unwrap_or_else(|_| panic!("{line}")));
    }
    let (seconds, rest) = entry.split_once(" s after ").unwrap_or_else(|| panic!("{line}"));
    let seconds: f64 = seconds.parse().unwrap();
    (Some((seconds * 1000.0).round() as u64), rest.trim_end_matches(" solves").parse().unwrap())
}

/// The summary's p50 solve seconds.
fn p50_seconds(output: &Output) -> f64 {
    let err = stderr(output);
    let at = err.find("solve seconds p50 ").unwrap_or_else(|| panic!("{err}")) + "solve seconds p50 ".len();
    err[at..].split(',').next().unwrap().trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_learns_a_first_wait_and_a_later_batch_starts_from_the_saved_models() {
    let emulator = emulator().await;
    let dir = scratch("learn");
    let table = table_first_wait_ms();

    // 30 fast Turnstile solves, 5 at a time: from the 20th on the model moves the first poll
    // toward the 3-4 s answers.
    let tasks = batch_file(&dir, 30);
    let first = cli(&emulator, &dir, &["--batch", tasks.to_str().unwrap(), "--solve-times", "times.json"]).await;
    assert!(first.status.success(), "{}", stderr(&first));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert_eq!(stdout.lines().filter(|l| l.starts_with("ok\t")).count(), 30, "{stdout}");
    assert!(stderr(&first).contains("30 tasks, plan of 6 threads, 5 at once"), "{}", stderr(&first));
    let (wait, observations) = learned(&first);
    assert_eq!(observations, 30, "{}", stderr(&first));
    let wait = wait.expect("a learned first wait after 30 solves");
    assert!(wait < table, "learned first wait {wait} ms, table {table} ms");

    // The saved file: a JSON object, captcha type -> model text (never the key).
    let saved = std::fs::read_to_string(dir.join("times.json")).unwrap();
    assert!(!saved.contains(KEY));
    let models: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&saved).unwrap();
    assert_eq!(models.keys().collect::<Vec<_>>(), ["turnstile"]);
    let model: serde_json::Value = serde_json::from_str(models["turnstile"].as_str().unwrap()).unwrap();
    assert_eq!((model["type"].as_str(), model["n"].as_u64()), (Some("turnstile"), Some(30)));

    // Without the file a batch starts from the table: 5 solves answered at its first poll.
    let five = batch_file(&dir, 5);
    let cold = cli(&emulator, &dir, &["--batch", five.to_str().unwrap()]).await;
    assert!(cold.status.success(), "{}", stderr(&cold));
    assert_eq!(learned(&cold), (None, 5));
    assert!(p50_seconds(&cold) * 1000.0 >= table as f64, "{}", stderr(&cold));

    // With it, the next batch starts from the saved models: its first solves already poll at
    // the learned wait, and the model continues counting.
    let warm = cli(&emulator, &dir, &["--batch", five.to_str().unwrap(), "--solve-times", "times.json"]).await;
    assert!(warm.status.success(), "{}", stderr(&warm));
    assert!(p50_seconds(&warm) * 1000.0 < table as f64, "{}", stderr(&warm));
    let (again, observations) = learned(&warm);
    assert_eq!(observations, 35);
    assert!(again.is_some_and(|ms| ms < table), "{}", stderr(&warm));
    let resaved: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("times.json")).unwrap()).unwrap();
    let model: serde_json::Value = serde_json::from_str(resaved["turnstile"].as_str().unwrap()).unwrap();
    assert_eq!(model["n"].as_u64(), Some(35));

    // A single solve learns and saves too.
    let single = cli(&emulator, &dir, &["--task", TURNSTILE, "--solve-times", "times.json"]).await;
    assert!(single.status.success(), "{}", stderr(&single));
    let resaved: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("times.json")).unwrap()).unwrap();
    let model: serde_json::Value = serde_json::from_str(resaved["turnstile"].as_str().unwrap()).unwrap();
    assert_eq!(model["n"].as_u64(), Some(36));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_solve_times_files_stop_before_any_solve() {
    let emulator = emulator().await;
    let dir = scratch("refused");
    let tasks = batch_file(&dir, 2);
    let model_of_turnstile = {
        let run = cli(&emulator, &dir, &["--task", TURNSTILE, "--solve-times", "learned.json"]).await;
        assert!(run.status.success(), "{}", stderr(&run));
        let saved: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(dir.join("learned.json")).unwrap()).unwrap();
        saved["turnstile"].as_str().unwrap().to_owned()
    };
    let cases = [
        ("not json", "not a JSON object of captcha type to model text"),
        (r#"{"turnstile": "not json"}"#, "the model of `turnstile` is refused: not JSON"),
        (r#"{"turnstile": "{\"format\":\"x\"}"}"#, "not a captchaai-engine solve-times model"),
        (&serde_json::json!({ "recaptcha_v2": model_of_turnstile }).to_string(), "a model of `turnstile` was given"),
    ];
    for (text, message) in cases {
        std::fs::write(dir.join("bad.json"), text).unwrap();
        emulator.clear_requests();
        let run = cli(&emulator, &dir, &["--batch", tasks.to_str().unwrap(), "--solve-times", "bad.json"]).await;
        assert!(!run.status.success());
        assert!(stderr(&run).contains(message), "{text}: {}", stderr(&run));
        assert!(emulator.requests().is_empty(), "{text}: nothing is sent");
        assert_eq!(std::fs::read_to_string(dir.join("bad.json")).unwrap(), text, "a refused file is left alone");
    }
    // A missing or empty file starts from empty models.
    std::fs::write(dir.join("empty.json"), "").unwrap();
    let run = cli(&emulator, &dir, &["--batch", tasks.to_str().unwrap(), "--solve-times", "empty.json"]).await;
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(learned(&run), (None, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_exit_non_zero_but_no_answer_is_lost() {
    let emulator = emulator().await;
    let dir = scratch("failures");
    // A batch with a refused task: every line and the summary, then a non-zero exit.
    let path = dir.join("mixed.jsonl");
    std::fs::write(&path, format!("{TURNSTILE}\n{{\"type\":\"nope\"}}\n")).unwrap();
    let run = cli(&emulator, &dir, &["--batch", path.to_str().unwrap()]).await;
    assert!(!run.status.success(), "{}", stderr(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    let kinds: Vec<&str> = stdout.lines().map(|line| line.split('\t').next().unwrap_or("")).collect();
    assert_eq!(kinds, ["ok", "error"], "{stdout}");
    assert!(stderr(&run).contains("1 of 2 tasks failed"), "{}", stderr(&run));
    // A single solve whose models file cannot be written still prints its answer.
    let run = cli(&emulator, &dir, &["--task", TURNSTILE, "--solve-times", "no/such/dir/times.json"]).await;
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(!String::from_utf8_lossy(&run.stdout).trim().is_empty(), "the answer is printed");
    assert!(stderr(&run).contains("warning: the solve-times models were not saved"), "{}", stderr(&run));
}
