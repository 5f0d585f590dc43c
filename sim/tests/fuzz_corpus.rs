//! The fuzz targets' bodies (fuzz/src/lib.rs), run natively over every seed (fuzz/seeds/<target>)
//! and every regression input (fuzz/regressions/<target>): the CI form of the fuzzers, with no
//! nightly toolchain or cargo-fuzz needed.

#[allow(dead_code)]
#[path = "../../fuzz/src/lib.rs"]
mod bodies;

use std::path::Path;

fn inputs(dir: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut files: Vec<_> = entries.map(|e| e.expect("entry").path()).filter(|p| p.is_file()).collect();
    files.sort();
    files.into_iter().map(|p| (p.display().to_string(), std::fs::read(&p).expect("read"))).collect()
}

fn run(target: &str, body: fn(&[u8])) {
    let seeds = inputs(&format!("fuzz/seeds/{target}"));
    assert!(!seeds.is_empty() || target == "none", "no seeds for {target}");
    let regressions = inputs(&format!("fuzz/regressions/{target}"));
    for (path, data) in seeds.iter().chain(&regressions) {
        if std::panic::catch_unwind(|| body(data)).is_err() {
            panic!("fuzz body `{target}` panicked on {path}");
        }
    }
    eprintln!("{target}: {} seeds, {} regressions", seeds.len(), regressions.len());
}

#[test]
fn reply_seeds_and_regressions() {
    run("reply", bodies::reply);
}

#[test]
fn task_seeds_and_regressions() {
    run("task", bodies::task);
}

#[test]
fn restore_seeds_and_regressions() {
    run("restore", bodies::restore);
}

#[test]
fn ops_seeds_and_regressions() {
    run("ops", bodies::ops);
}

#[test]
fn edge_request_seeds_and_regressions() {
    run("edge_request", bodies::edge_request);
}

#[test]
fn endpoint_request_seeds_and_regressions() {
    run("endpoint_request", bodies::endpoint_request);
}
