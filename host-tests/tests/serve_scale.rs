//! The edge app on two `captchaai-serve` processes sharing one Redis (a redis-server this test
//! starts; ignored by default, run with `--include-ignored`), against the real emulator:
//! three times the plan's threads of tasks at once, spread over both processes. The emulator's
//! record shows busy threads never above the plan, every task solved, each submitted once and
//! delivered (again from the other process, the same body). Needs the composed edge app
//! (`cargo xtask component && cargo xtask edge`).

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use captchaai_emulator::{CaptchaKind, Emulator, EmulatorConfig};
use support::edge_client::{Clients, ServeProcess, solve_three_times_the_plan};
use support::redis::RedisServer;

const KEY: &str = "0123456789abcdef0123456789abcdef";
const TOKEN: &str = "scale-test-token-7e57c0de";
const PLAN: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: --include-ignored"]
async fn two_serve_processes_on_one_redis_never_oversubscribe_the_plan() {
    let redis = RedisServer::start("scale");
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
    std::fs::write(&runtime_config, redis.runtime_config()).unwrap();
    let a = ServeProcess::start(
        &["--runtime-config-file".as_ref(), runtime_config.as_ref()],
        KEY,
        TOKEN,
        &emulator.base_url(),
    )
    .await;
    let b = ServeProcess::start(
        &["--runtime-config-file".as_ref(), runtime_config.as_ref()],
        KEY,
        TOKEN,
        &emulator.base_url(),
    )
    .await;
    solve_three_times_the_plan(Arc::new(Clients::new(TOKEN)), [a.url.clone(), b.url.clone()], &emulator, PLAN).await;
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}
