//! Counters kept with `wasi:keyvalue` `increment`, so they add up across instances, and
//! `GET /metrics` in the Prometheus text format. Labels are the engine's enums only: never a
//! key, token, answer, code text or id. Counting never fails a request (errors are logged).

use std::fmt::Write as _;

use crate::engine::{FailureClass, FailureOrigin, RequestKind, SolveTimes};
use crate::kv::Kv;
use crate::times;

/// Solve-time histogram bucket bounds, seconds.
pub const SOLVE_SECONDS_BUCKETS: &[u64] = &[5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300];

const CLASSES: &[(&str, FailureClass)] = &[
    ("permanent", FailureClass::Permanent),
    ("transient", FailureClass::Transient),
    ("unsolvable", FailureClass::Unsolvable),
];
const ORIGINS: &[(&str, FailureOrigin)] =
    &[("input", FailureOrigin::Input), ("service", FailureOrigin::Service), ("no_answer", FailureOrigin::NoAnswer)];
const KINDS: &[(&str, RequestKind)] = &[
    ("submit", RequestKind::Submit),
    ("poll", RequestKind::Poll),
    ("threads_info", RequestKind::ThreadsInfo),
    ("balance", RequestKind::Balance),
    ("report", RequestKind::Report),
];

fn bump(kv: &Kv, key: &str, delta: i64) {
    if let Err(e) = kv.increment(key, delta) {
        eprintln!("edge: metrics: {e:#}");
    }
}

fn class_name(class: FailureClass) -> &'static str {
    CLASSES.iter().find(|(_, c)| *c == class).map_or("unknown", |(n, _)| n)
}

fn origin_name(origin: FailureOrigin) -> &'static str {
    ORIGINS.iter().find(|(_, o)| *o == origin).map_or("unknown", |(n, _)| n)
}

fn kind_name(kind: RequestKind) -> &'static str {
    KINDS.iter().find(|(_, k)| *k == kind).map_or("unknown", |(n, _)| n)
}

/// Time-in-queue histogram bucket bounds (from acceptance to a thread slot), seconds.
pub const QUEUE_SECONDS_BUCKETS: &[u64] = &[1, 2, 5, 10, 30, 60, 120, 300];

/// A histogram observation: its bucket among `bounds` (seconds; `inf` past the last) and its
/// sum, under `prefix`.
fn observe(kv: &Kv, prefix: &str, bounds: &[u64], ms: u64) {
    let bucket = bounds.iter().find(|le| ms <= *le * 1_000);
    bump(kv, &format!("{prefix}/{}", bucket.map_or("inf".to_owned(), u64::to_string)), 1);
    bump(kv, &format!("{prefix}/sum_ms"), i64::try_from(ms).unwrap_or(i64::MAX));
}

/// A solve of client `owner` (its label; `None` for solves of an earlier version) ended with
/// an answer after `elapsed_ms` (the engine's `elapsed-ms`).
pub fn solved(kv: &Kv, owner: Option<&str>, elapsed_ms: u64) {
    bump(kv, "metrics/solves/solved", 1);
    observe(kv, "metrics/solve_seconds", SOLVE_SECONDS_BUCKETS, elapsed_ms);
    if let Some(label) = owner {
        bump(kv, &format!("metrics/client/{label}/solved"), 1);
    }
}

/// A solve of client `owner` (or a task it sent that was refused before it started) ended with
/// a failure.
pub fn failed(kv: &Kv, owner: Option<&str>, class: FailureClass, origin: FailureOrigin) {
    bump(kv, &format!("metrics/solves/failed/{}/{}", class_name(class), origin_name(origin)), 1);
    if let Some(label) = owner {
        bump(kv, &format!("metrics/client/{label}/failed/{}", class_name(class)), 1);
    }
}

/// A solve of client `owner` took its thread slots `waited_ms` after the edge accepted it.
pub fn queued(kv: &Kv, owner: Option<&str>, waited_ms: u64) {
    if let Some(label) = owner {
        observe(kv, &format!("metrics/client/{label}/queue_seconds"), QUEUE_SECONDS_BUCKETS, waited_ms);
    }
}

/// A driver found a submit whose reply was never saved, and sends it again
/// (`crate::lifecycle`, submits in doubt).
pub fn submit_in_doubt(kv: &Kv) {
    bump(kv, "metrics/submits_in_doubt", 1);
}

/// An upstream request of `kind` came back with a reply (`ok`) or a transport error.
pub fn upstream(kv: &Kv, kind: RequestKind, ok: bool) {
    let result = if ok { "reply" } else { "transport_error" };
    bump(kv, &format!("metrics/upstream/{}/{result}", kind_name(kind)), 1);
}

/// A histogram under `prefix` (`observe`) as Prometheus lines of `name` with `labels`.
fn render_histogram(
    kv: &Kv,
    out: &mut String,
    name: &str,
    labels: &str,
    prefix: &str,
    bounds: &[u64],
) -> anyhow::Result<()> {
    let mut cumulative = 0;
    for le in bounds {
        cumulative += kv.counter(&format!("{prefix}/{le}"))?;
        writeln!(out, "{name}_bucket{{{labels}le=\"{le}\"}} {cumulative}")?;
    }
    cumulative += kv.counter(&format!("{prefix}/inf"))?;
    writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {cumulative}")?;
    let sum_ms = kv.counter(&format!("{prefix}/sum_ms"))?;
    let labels = match labels.trim_end_matches(',') {
        "" => String::new(),
        labels => format!("{{{labels}}}"),
    };
    writeln!(out, "{name}_sum{labels} {}", sum_ms as f64 / 1_000.0)?;
    writeln!(out, "{name}_count{labels} {cumulative}")?;
    Ok(())
}

/// Per client (by label, never a token): its solves by outcome and failure class, its time in
/// the queue, and the slots of its share held now (`busy`, for clients with a share).
fn render_clients(kv: &Kv, out: &mut String, clients: &[(&str, Option<(u64, u64)>)]) -> anyhow::Result<()> {
    *out += "# HELP captchaai_edge_client_solves_total Solves that ended, by client (its label), outcome and failure class.\n";
    *out += "# TYPE captchaai_edge_client_solves_total counter\n";
    for (label, _) in clients {
        let solved = kv.counter(&format!("metrics/client/{label}/solved"))?;
        writeln!(
            out,
            "captchaai_edge_client_solves_total{{client=\"{label}\",outcome=\"solved\",class=\"\"}} {solved}"
        )?;
        for (class, _) in CLASSES {
            let n = kv.counter(&format!("metrics/client/{label}/failed/{class}"))?;
            writeln!(
                out,
                "captchaai_edge_client_solves_total{{client=\"{label}\",outcome=\"failed\",class=\"{class}\"}} {n}"
            )?;
        }
    }
    *out += "# HELP captchaai_edge_client_queue_seconds Time from the edge accepting a solve to its thread slots, by client.\n";
    *out += "# TYPE captchaai_edge_client_queue_seconds histogram\n";
    for (label, _) in clients {
        let prefix = format!("metrics/client/{label}/queue_seconds");
        let labels = format!("client=\"{label}\",");
        render_histogram(kv, out, "captchaai_edge_client_queue_seconds", &labels, &prefix, QUEUE_SECONDS_BUCKETS)?;
    }
    *out += "# HELP captchaai_edge_client_threads_busy Slots of a client's share held now, against its share (client_threads).\n";
    *out += "# TYPE captchaai_edge_client_threads_busy gauge\n";
    for (label, share) in clients {
        if let Some((busy, share)) = share {
            writeln!(out, "captchaai_edge_client_threads_busy{{client=\"{label}\",share=\"{share}\"}} {busy}")?;
        }
    }
    Ok(())
}

/// The Prometheus text exposition of every counter, plus threads busy and the plan, and per
/// client (`clients`: each label, with its share's slots busy and its share where it has one).
pub fn render(kv: &Kv, busy: u64, plan: Option<u64>, clients: &[(&str, Option<(u64, u64)>)]) -> anyhow::Result<String> {
    let mut out = String::new();
    let solved = kv.counter("metrics/solves/solved")?;
    out += "# HELP captchaai_edge_solves_total Solves that ended, by outcome, failure class and origin.\n";
    out += "# TYPE captchaai_edge_solves_total counter\n";
    writeln!(out, "captchaai_edge_solves_total{{outcome=\"solved\",class=\"\",origin=\"\"}} {solved}")?;
    let (mut failed_total, mut unsolvable) = (0, 0);
    for (class, _) in CLASSES {
        for (origin, _) in ORIGINS {
            let n = kv.counter(&format!("metrics/solves/failed/{class}/{origin}"))?;
            writeln!(
                out,
                "captchaai_edge_solves_total{{outcome=\"failed\",class=\"{class}\",origin=\"{origin}\"}} {n}"
            )?;
            if *origin != "input" {
                failed_total += n;
            }
            if *class == "unsolvable" {
                unsolvable += n;
            }
        }
    }
    let attempted = solved + failed_total;
    let ratio = if attempted > 0 { unsolvable as f64 / attempted as f64 } else { 0.0 };
    out += "# HELP captchaai_edge_unsolvable_ratio Unsolvable solves over solves sent upstream that ended.\n";
    out += "# TYPE captchaai_edge_unsolvable_ratio gauge\n";
    writeln!(out, "captchaai_edge_unsolvable_ratio {ratio}")?;
    out += "# HELP captchaai_edge_solve_seconds Time from submit to answer of solved solves.\n";
    out += "# TYPE captchaai_edge_solve_seconds histogram\n";
    render_histogram(kv, &mut out, "captchaai_edge_solve_seconds", "", "metrics/solve_seconds", SOLVE_SECONDS_BUCKETS)?;
    out += "# HELP captchaai_edge_upstream_requests_total Requests sent to CaptchaAI, by kind and result.\n";
    out += "# TYPE captchaai_edge_upstream_requests_total counter\n";
    for (kind, _) in KINDS {
        for result in ["reply", "transport_error"] {
            let n = kv.counter(&format!("metrics/upstream/{kind}/{result}"))?;
            writeln!(out, "captchaai_edge_upstream_requests_total{{kind=\"{kind}\",result=\"{result}\"}} {n}")?;
        }
    }
    let in_doubt = kv.counter("metrics/submits_in_doubt")?;
    out += "# HELP captchaai_submits_in_doubt_total Submits sent whose reply was never saved (their driver stopped), sent again; each possible orphan task keeps a thread slot until the solve's deadline.\n";
    out += "# TYPE captchaai_submits_in_doubt_total counter\n";
    writeln!(out, "captchaai_submits_in_doubt_total {in_doubt}")?;
    out += "# HELP captchaai_edge_threads_busy Thread slots held by solves now (all instances).\n";
    out += "# TYPE captchaai_edge_threads_busy gauge\n";
    writeln!(out, "captchaai_edge_threads_busy {busy}")?;
    render_solve_times(kv, &mut out)?;
    render_clients(kv, &mut out, clients)?;
    if let Some(plan) = plan {
        out += "# HELP captchaai_edge_threads_plan The plan's threads (threadsinfo, cached).\n";
        out += "# TYPE captchaai_edge_threads_plan gauge\n";
        writeln!(out, "captchaai_edge_threads_plan {plan}")?;
    }
    Ok(out)
}

/// The shared solve-times models (`crate::times`), one per captcha type that has one: their
/// observations, the first wait they give, their quantiles (all from the engine), and the
/// observations dropped.
fn render_solve_times(kv: &Kv, out: &mut String) -> anyhow::Result<()> {
    let models = times::summaries(kv)?;
    *out += "# HELP captchaai_edge_solve_times_observations Solved solves the shared solve-time model of each captcha type has learned from (adaptive polling).\n";
    *out += "# TYPE captchaai_edge_solve_times_observations gauge\n";
    for model in &models {
        writeln!(
            out,
            "captchaai_edge_solve_times_observations{{type=\"{}\"}} {}",
            model.task_type, model.observations
        )?;
    }
    writeln!(
        out,
        "# HELP captchaai_edge_solve_times_first_wait_seconds The first wait the model gives new solves of the type; absent while the type's table applies (under {} observations).",
        SolveTimes::min_observations()
    )?;
    *out += "# TYPE captchaai_edge_solve_times_first_wait_seconds gauge\n";
    for model in &models {
        if let Some(ms) = model.first_wait_ms {
            writeln!(
                out,
                "captchaai_edge_solve_times_first_wait_seconds{{type=\"{}\"}} {}",
                model.task_type,
                ms as f64 / 1_000.0
            )?;
        }
    }
    *out += "# HELP captchaai_edge_solve_times_quantile_seconds Solve time quantiles as the type's model sees them (its histogram bucket's lower edge; recent solves weigh most).\n";
    *out += "# TYPE captchaai_edge_solve_times_quantile_seconds gauge\n";
    for model in &models {
        for (permille, ms) in &model.quantiles {
            writeln!(
                out,
                "captchaai_edge_solve_times_quantile_seconds{{type=\"{}\",quantile=\"{}\"}} {}",
                model.task_type,
                f64::from(*permille) / 1_000.0,
                *ms as f64 / 1_000.0
            )?;
        }
    }
    let conflicts = kv.counter("metrics/solve_times/conflicts")?;
    *out += "# HELP captchaai_edge_solve_times_conflicts_total Swaps of a model that found it changed since it was read (another observation came first), each tried again.\n";
    *out += "# TYPE captchaai_edge_solve_times_conflicts_total counter\n";
    writeln!(out, "captchaai_edge_solve_times_conflicts_total {conflicts}")?;
    *out += "# HELP captchaai_edge_solve_times_dropped_total Observations of solved solves not saved into their model: every try lost its race, or the store failed.\n";
    *out += "# TYPE captchaai_edge_solve_times_dropped_total counter\n";
    for reason in ["contention", "store"] {
        let n = kv.counter(&format!("metrics/solve_times/dropped/{reason}"))?;
        writeln!(out, "captchaai_edge_solve_times_dropped_total{{reason=\"{reason}\"}} {n}")?;
    }
    Ok(())
}
