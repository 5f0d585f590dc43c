//! A real redis-server on a free loopback port, started and stopped by the test itself.
//! Tests that use it are `#[ignore]`d with a reason naming Redis: they run with
//! `--include-ignored` (scripts/test.sh, which installs redis-server), and fail there when
//! redis-server is missing.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-server child on 127.0.0.1 (no persistence), killed when dropped.
pub struct RedisServer {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A Spin runtime config (TOML) whose default key-value store is this server.
    pub fn runtime_config(&self) -> String {
        format!("[key_value_store.default]\ntype = \"redis\"\nurl = \"{}\"\n", self.url())
    }

    /// `redis-cli` against this server.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli").args(["-p", &self.port.to_string()]).args(args).output().unwrap();
        assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// (keys, total bytes of string values) in the store.
    pub fn usage(&self) -> (u64, u64) {
        let keys = self.cli(&["DBSIZE"]).parse().unwrap();
        let script = "local n=0 for _,k in ipairs(redis.call('KEYS','*')) do \
                      if redis.call('TYPE',k).ok=='string' then n=n+redis.call('STRLEN',k) end end return n";
        let bytes = self.cli(&["EVAL", script, "0"]).parse().unwrap();
        (keys, bytes)
    }

    /// Every key in the store.
    pub fn keys(&self) -> Vec<String> {
        self.cli(&["KEYS", "*"]).lines().map(str::to_owned).collect()
    }

    /// Starts redis-server (`$REDIS_SERVER`, else `redis-server` on PATH). Panics, saying how to
    /// install it, if it is missing, and if it does not come up within 10 s.
    pub fn start(name: &str) -> RedisServer {
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        if Command::new(&binary).arg("--version").stdout(Stdio::null()).status().is_err() {
            panic!(
                "this test needs a real Redis: {binary} is not installed (apt-get update && apt-get install -y \
                 redis-server, or set REDIS_SERVER to its path)"
            );
        }
        let port = free_port();
        let dir =
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("redis-{name}-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = spawn(&binary, port, &dir);
        RedisServer { child, port, dir }
    }

    /// Stops the server as an operator restarting it would (`SHUTDOWN SAVE`: its data kept on
    /// disk); [`RedisServer::start_again`] brings it back with that data.
    pub fn stop_keeping_data(&mut self) {
        let _ = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "SHUTDOWN", "SAVE"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same port and directory (loading what
    /// [`RedisServer::stop_keeping_data`] saved).
    pub fn start_again(&mut self) {
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        self.child = spawn(&binary, self.port, &self.dir);
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing is answered.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success(), "kill {signal} redis-server");
    }

    /// Starts recording every command the server receives, with the server's own time of
    /// each (`MONITOR`); recording stops when the [`Monitor`] is dropped.
    pub async fn monitor(&self) -> Monitor {
        let mut child = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "MONITOR"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-cli MONITOR");
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        let recorded = lines.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                recorded.lock().unwrap().push(line);
            }
        });
        let monitor = Monitor { child, lines };
        // redis-cli prints OK once the server streams commands to it.
        super::wait::until("redis-cli MONITOR to start", async || monitor.lines().iter().any(|l| l == "OK")).await;
        monitor
    }

    /// Kills the server and starts a fresh one (empty: no persistence) on the same port.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        self.child = spawn(&binary, self.port, &self.dir);
    }
}

/// Starts redis-server on `port` and waits (at most 10 s) until it answers PING.
fn spawn(binary: &str, port: u16, dir: &std::path::Path) -> Child {
    let mut child = Command::new(binary)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning redis-server");
    if !answers_ping(port) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("redis-server did not answer on port {port}");
    }
    child
}

/// Whether a Redis server answers PING on `port` within 10 s.
fn answers_ping(port: u16) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            use std::io::{Read, Write};
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            let mut buf = [0u8; 16];
            if s.write_all(b"PING\r\n").is_ok() && s.read(&mut buf).is_ok_and(|n| buf[..n].starts_with(b"+PONG")) {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.child.id().to_string()]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The commands a server received since [`RedisServer::monitor`], as `redis-cli MONITOR`
/// prints them (`SECONDS.MICROS [DB ADDR] "COMMAND" "ARG" ...`, the time the server's).
pub struct Monitor {
    child: Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Monitor {
    /// The lines printed so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The server's time (ms since the epoch) of the first command recorded that begins with
    /// `command` (the command's name and its first arguments, e.g. `["INCRBY", key]`).
    pub fn first(&self, command: &[&str]) -> Option<f64> {
        let quoted: Vec<String> = command.iter().map(|word| format!("\"{word}\"")).collect();
        let wanted = format!("] {}", quoted.join(" "));
        let line = self.lines().into_iter().find(|l| l.contains(&wanted))?;
        line.split(' ').next()?.parse::<f64>().ok().map(|s| s * 1000.0)
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
