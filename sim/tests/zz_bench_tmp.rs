#[allow(dead_code)]
#[path = "/work/main/fuzz/src/lib.rs"]
mod bodies;
#[test]
fn bench() {
    let d = [18u8, 1, 200, 0, b'x'];
    let start = std::time::Instant::now();
    for _ in 0..20000 {
        bodies::reply(&d);
    }
    eprintln!("{:.1} us", start.elapsed().as_secs_f64() * 1e6 / 20000.0);
}
