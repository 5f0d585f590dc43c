//! The CI form of the simulation: 20,000 solves with 30% faulty replies and a tenth of the hosts
//! stalling once (a few seconds). The full run is
//! `cargo run --release -p sim -- --solves 1000000 --fault-rate 0.3 --stall-rate 0.1 --seed N`.

use sim::{Options, run};

#[test]
fn twenty_thousand_faulty_solves_match_the_oracle() {
    let options = Options { solves: 20_000, fault_rate: 0.3, stall_rate: 0.1, seed: 2026, ..Options::default() };
    let report = run(&options);
    for v in &report.violations {
        eprintln!("{v}");
    }
    assert!(report.violations.is_empty(), "{} violations (seed {})", report.violations.len(), options.seed);
    assert_eq!(report.solves, 20_000);
    assert_eq!(report.solved + report.failed, 20_000, "every solve ended");
    assert!(report.max_past_deadline_ms <= 30_000, "a prompt host's bound is deadline + one request timeout");
    // Stalled hosts past the deadline sent last polls, and some of them saved the answer.
    let r = &report;
    assert!(r.stalled > 1_500 && r.last_polls > 50 && r.last_poll_saves > 30, "{r:?}");
    // Every condition and fault kind occurred, and restores happened both before a send and
    // while a request was out.
    for (name, count) in &report.conditions {
        assert!(*count > 0, "no solve had condition {name}");
    }
    let f = &report.faults;
    for (name, n) in [
        ("unreadable", f.unreadable),
        ("server codes", f.server_code),
        ("dropped", f.dropped),
        ("slow past the timeout", f.slow_past_timeout),
        ("transport", f.transport),
        ("key echoed", f.key_echoed),
        ("plain-text codes", f.plain_text_code),
    ] {
        assert!(n > 0, "no {name} fault was injected");
    }
    assert!(report.restores > 3_000 && report.restores_in_flight > 1_000, "{report:?}");
    assert!(report.debug_checked > 0);
    // Solves made with a learned model: first waits learned, gaps learned, and gaps waited out.
    let r = &report;
    assert!(r.with_model > 5_000 && r.learned_first_waits > 4_000, "{r:?}");
    assert!(r.learned_gaps > 1_000 && r.gaps_taken > 500, "{r:?}");
    for code in ["DEADLINE_EXCEEDED", "ERROR_ZERO_BALANCE", "IP_BANNED", "ERROR_CAPTCHA_UNSOLVABLE", "TRANSPORT_ERROR"]
    {
        assert!(report.codes.iter().any(|(c, _)| c == code), "no solve failed with {code}");
    }
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let options = Options { solves: 2_000, seed: 99, ..Options::default() };
    let (a, b) = (run(&options), run(&options));
    assert_eq!(
        (a.solved, a.failed, a.sends, a.virtual_ms, a.codes),
        (b.solved, b.failed, b.sends, b.virtual_ms, b.codes)
    );
}

#[test]
fn without_faults_only_short_deadlines_fail() {
    let report = run(&Options { solves: 2_000, fault_rate: 0.0, seed: 5, ..Options::default() });
    assert!(report.violations.is_empty());
    // Tasks take 3-45 s upstream; some configs set a 30 s deadline.
    assert!(report.solved > 1_900, "{report:?}");
    assert!(report.codes.iter().all(|(code, _)| code == "DEADLINE_EXCEEDED"), "{:?}", report.codes);
}
