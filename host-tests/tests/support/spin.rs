//! Real Spin for the edge tests: `spin up --from spin.toml` with the Spin 4.1 CLI at
//! `$SPIN_BIN`, or `../shared/tools/spin/spin` beside the repository (see its README). The
//! real-Spin tests are `#[ignore]`d (run with `--include-ignored`); where no Spin CLI exists they
//! fail saying so.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("host-tests sits in the repository").to_path_buf()
}

/// The Spin CLI to test with: `$SPIN_BIN`, else `../shared/tools/spin/spin` from the repository
/// root. Panics, saying where it looked, where there is none.
pub fn binary() -> PathBuf {
    let (path, from) = match std::env::var_os("SPIN_BIN") {
        Some(path) => (PathBuf::from(path), "$SPIN_BIN"),
        None => (root().join("../shared/tools/spin/spin"), "the default location"),
    };
    assert!(
        path.is_file(),
        "this test needs real Spin: no Spin CLI at {} ({from}); set SPIN_BIN to a Spin 4.1+ binary",
        path.display()
    );
    path
}

/// A `spin up` process serving the repository's spin.toml on a loopback port, with its own
/// state dir (SQLite key-value store, logs), killed and cleaned up on drop.
pub struct SpinUp {
    child: Child,
    url: String,
    state_dir: PathBuf,
}

impl SpinUp {
    /// Starts `spin` with these Spin variables (`SPIN_VARIABLE_<NAME>`) and waits until it serves.
    pub async fn start(spin: &Path, variables: &[(&str, &str)]) -> SpinUp {
        SpinUp::start_with(spin, variables, None).await
    }

    /// As [`SpinUp::start`], with a Spin runtime config (TOML text, e.g. a Redis key-value
    /// store) passed as `--runtime-config-file`.
    pub async fn start_with(spin: &Path, variables: &[(&str, &str)], runtime_config: Option<&str>) -> SpinUp {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let state_dir = std::env::temp_dir().join(format!(
            "captchaai-edge-spin-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&state_dir);
        std::fs::create_dir_all(&state_dir).unwrap();
        let address = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let mut command = Command::new(spin);
        command
            .current_dir(root())
            .args(["up", "--from"])
            .arg(root().join("spin.toml"))
            .args(["--listen", &address.to_string(), "--state-dir"])
            .arg(&state_dir)
            .args(
                runtime_config
                    .map(|toml| {
                        let file = state_dir.join("runtime-config.toml");
                        std::fs::write(&file, toml).unwrap();
                        vec![std::ffi::OsString::from("--runtime-config-file"), file.into_os_string()]
                    })
                    .unwrap_or_default(),
            )
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Its own process group: `spin up` runs the app in a child process (`trigger http`)
            // that killing `spin up` alone would leave running.
            .process_group(0)
            .kill_on_drop(true);
        for (name, value) in variables {
            command.env(format!("SPIN_VARIABLE_{}", name.to_ascii_uppercase()), value);
        }
        let mut child = command.spawn().unwrap_or_else(|e| panic!("starting {}: {e}", spin.display()));
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if tokio::net::TcpStream::connect(address).await.is_ok() {
                break;
            }
            if let Some(status) = child.try_wait().unwrap() {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    use tokio::io::AsyncReadExt;
                    let _ = pipe.read_to_string(&mut stderr).await;
                }
                panic!("spin up exited with {status} before serving:\n{stderr}");
            }
            assert!(Instant::now() < deadline, "spin up did not serve on {address} within 120 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Spin's own log (start-up lines, the occasional shutdown backtrace) is not asserted on;
        // drain it so a full pipe never blocks Spin.
        if let Some(mut pipe) = child.stderr.take() {
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut pipe, &mut tokio::io::sink()).await;
            });
        }
        SpinUp { child, url: format!("http://{address}"), state_dir }
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// What the component wrote to stdout and stderr (Spin keeps it in the state dir's `logs/`).
    pub fn component_log(&self) -> String {
        let mut log = String::new();
        for entry in std::fs::read_dir(self.state_dir.join("logs")).into_iter().flatten().flatten() {
            log += &String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap_or_default());
        }
        log
    }
}

impl Drop for SpinUp {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let group = format!("-{pid}");
            let _ = std::process::Command::new("kill").args(["-KILL", "--", &group]).status();
        }
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.state_dir);
    }
}
