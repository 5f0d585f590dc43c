//! Drives a solve until it ends or the request's wait runs out. The engine decides everything:
//! what to send and when (each request's `at`), what a reply means, when to give up.

use crate::engine::{Failure, HttpResponse, Output, Solution, Solve};
use crate::upstream;

/// Where a solve stands when the request has to answer.
pub enum Progress {
    Solved(Solution),
    Failed(Failure),
    /// Still in flight: keep `snapshot` and ask the client to come back in `retry_after_ms`.
    Pending {
        snapshot: String,
        retry_after_ms: u64,
    },
}

/// The time, epoch ms.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Sleeps until `at` (epoch ms); waking early is impossible, waking late harmless.
pub async fn sleep_until(at: u64) {
    loop {
        let now = now_ms();
        if now >= at {
            return;
        }
        spin_sdk::time::sleep(std::time::Duration::from_millis(at - now)).await;
    }
}

fn misuse(m: crate::engine::Misuse) -> anyhow::Error {
    anyhow::anyhow!("engine misuse: {m:?}")
}

/// Runs `solve` until it ends, or until its next request is due after `wait_until` (epoch ms).
/// An upstream request only starts by `wait_until` (the first one that is due may always start,
/// so even `wait=0` makes progress), so the caller answers by `wait_until` + the upstream
/// timeout. `may_send` is asked before every upstream request (the lease check); if it says no,
/// the solve is left as it was before that request.
///
/// The engine's state does not change between handing out a request and being given its reply,
/// so the snapshot kept for a pending answer is taken before anything is sent.
pub async fn run<F, Fut>(solve: &Solve, wait_until: u64, mut may_send: F) -> anyhow::Result<Progress>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let mut sent = false;
    let mut output = solve.poll_output(now_ms()).map_err(misuse)?;
    loop {
        let request = match output {
            Output::Solved(solution) => return Ok(Progress::Solved(solution)),
            Output::Failed(failure) => return Ok(Progress::Failed(failure)),
            Output::Send(request) => request,
        };
        let now = now_ms();
        if request.at > wait_until || (sent && now >= wait_until) {
            let retry_after_ms = request.at.saturating_sub(now);
            return Ok(Progress::Pending { snapshot: solve.snapshot(), retry_after_ms });
        }
        sleep_until(request.at).await;
        if !may_send().await? {
            return Ok(Progress::Pending { snapshot: solve.snapshot(), retry_after_ms: 1_000 });
        }
        sent = true;
        output = match upstream::send(&request).await {
            Ok(reply) => solve.handle_response(now_ms(), request.id, &reply),
            Err(error) => solve.handle_transport_error(now_ms(), request.id, error),
        }
        .map_err(misuse)?;
    }
}

/// A reply body as the engine takes it: text, each invalid UTF-8 sequence replaced by U+FFFD
/// (the WIT's rule for every host).
pub fn response(status: u16, body: &[u8]) -> HttpResponse {
    HttpResponse { status, body: String::from_utf8_lossy(body).into_owned() }
}
