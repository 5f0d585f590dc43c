//! Writes fuzz/seeds/restore/: real snapshots taken after every call while replaying every
//! golden vector (`cargo run -p sim --example snapshot_seeds`).

use captchaai_engine::{Config, Failure, Misuse, Output, Solve, TransportError};
use captchaai_vectors::{Engine, Native, Vector, replay};

/// The native engine, keeping every solve's snapshot after each call.
struct Recorder {
    native: Native,
    snapshots: Vec<String>,
}

impl Engine for Recorder {
    type Solve = Solve;
    fn create(&mut self, task: &str, key: &str, config: &Config, now: u64) -> Result<Solve, Failure> {
        self.native.create(task, key, config, now)
    }
    fn restore(&mut self, snapshot: &str, key: &str) -> Result<Solve, String> {
        self.native.restore(snapshot, key)
    }
    fn snapshot(&mut self, solve: &Solve) -> String {
        solve.snapshot()
    }
    fn poll_output(&mut self, solve: &mut Solve, now: u64) -> Result<Output, Misuse> {
        let out = self.native.poll_output(solve, now);
        self.snapshots.push(solve.snapshot());
        out
    }
    fn handle_response(
        &mut self,
        solve: &mut Solve,
        now: u64,
        id: u32,
        status: u16,
        body: &[u8],
    ) -> Result<Output, Misuse> {
        let out = self.native.handle_response(solve, now, id, status, body);
        self.snapshots.push(solve.snapshot());
        out
    }
    fn handle_transport_error(
        &mut self,
        solve: &mut Solve,
        now: u64,
        id: u32,
        e: TransportError,
    ) -> Result<Output, Misuse> {
        let out = self.native.handle_transport_error(solve, now, id, e);
        self.snapshots.push(solve.snapshot());
        out
    }
}

fn main() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = format!("{root}/fuzz/seeds/restore");
    std::fs::create_dir_all(&out).expect("mkdir");
    // Exactly this run's snapshots: the old ones go first.
    for entry in std::fs::read_dir(&out).expect("seeds") {
        let path = entry.expect("entry").path();
        if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("snapshot-")) {
            std::fs::remove_file(path).expect("remove");
        }
    }
    let mut recorder = Recorder { native: Native, snapshots: Vec::new() };
    let mut paths: Vec<_> = std::fs::read_dir(format!("{root}/testdata/vectors"))
        .expect("vectors")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    for path in paths {
        let vector = Vector::parse(&std::fs::read_to_string(&path).expect("read")).expect("vector");
        replay(&mut recorder, &vector);
    }
    recorder.snapshots.sort();
    recorder.snapshots.dedup();
    // The fuzz key: snapshots hold no key, so any key restores them.
    for (i, snapshot) in recorder.snapshots.iter().enumerate() {
        std::fs::write(format!("{out}/snapshot-{i:04}"), snapshot).expect("write");
    }
    println!("{} snapshots in {out}", recorder.snapshots.len());
}
