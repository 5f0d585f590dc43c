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

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
