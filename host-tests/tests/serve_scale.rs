//! The edge app on two `captchaai serve` processes sharing one Redis (a redis-server this test
//! starts; skipped with a message only if it is not installed), against the real emulator:
//! three times the plan's threads of tasks at once, spread over both processes. The emulator's
//! record shows busy threads never above the plan, every task solved, each submitted once and
//! delivered (again from the other process, the same body). Needs the composed edge app
//! (`cargo xtask component && cargo xtask edge`).

mod serve_support;
mod support;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncBufReadExt;

use host_tests::emulator::{CaptchaKind, Emulator, EmulatorConfig};
use serve_support::RedisServer;
use support::edge_client::{Clients, solve_three_times_the_plan};

const KEY: &str = "0123456789abcdef0123456789abcdef";
const TOKEN: &str = "scale-test-token-7e57c0de";
const PLAN: usize = 2;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A `captchaai serve --manifest spin.toml` child process, killed on drop.
struct ServeProcess {
    child: tokio::process::Child,
    url: String,
}

impl ServeProcess {
    async fn start(runtime_config: &std::path::Path, api_base: &str) -> ServeProcess {
        let edge = root().join("target/edge/captchaai_edge.wasm");
        assert!(edge.exists(), "{} is missing: run cargo xtask component && cargo xtask edge", edge.display());
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_captchaai"))
            .arg("serve")
            .arg("--manifest")
            .arg(root().join("spin.toml"))
            .args(["--listen", "127.0.0.1:0", "--quiet-guest"])
            .arg("--runtime-config-file")
            .arg(runtime_config)
            .arg("--cache-dir")
            .arg(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-cache"))
            .env("SPIN_VARIABLE_CAPTCHAAI_KEY", KEY)
            .env("SPIN_VARIABLE_CLIENT_TOKENS", TOKEN)
            .env("SPIN_VARIABLE_API_BASE", api_base)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn captchaai serve");
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        // A first start compiles the edge app (debug build of the host: slow).
        let line = tokio::time::timeout(Duration::from_secs(300), lines.next_line())
            .await
            .expect("serve did not start within 300 s")
            .unwrap()
            .expect("serve exited before listening");
        let url = line.strip_prefix("serving ").unwrap_or_else(|| panic!("unexpected stdout {line:?}")).to_owned();
        ServeProcess { child, url }
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_on_one_redis_never_oversubscribe_the_plan() {
    let Some(redis) = RedisServer::start("scale") else { return };
    let emulator =
        Emulator::start(EmulatorConfig::default().with_seed(11).with_account(KEY, PLAN as u32).with_solve_time(
            CaptchaKind::Image,
            1_000,
            3_000,
        ))
        .await
        .unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runtime_config = dir.join("runtime-config.toml");
    std::fs::write(
        &runtime_config,
        format!("[key_value_store.default]\ntype = \"redis\"\nurl = \"{}\"\n", redis.url()),
    )
    .unwrap();
    let a = ServeProcess::start(&runtime_config, &emulator.base_url()).await;
    let b = ServeProcess::start(&runtime_config, &emulator.base_url()).await;
    solve_three_times_the_plan(Arc::new(Clients::new(TOKEN)), [a.url.clone(), b.url.clone()], &emulator, PLAN).await;
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}
