//! Drives a solve until it ends or the request's wait runs out. The engine decides everything:
//! what to send, how long to wait, what a reply means.

use captchaai_engine::{Failure, Output, Solution, Solve};

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

/// Runs `solve` until it ends, or until no step can start before `wait_until` (epoch ms). An
/// upstream request is only started before `wait_until` (the first one that is due may always
/// start, so even `wait=0` makes progress), so the caller answers by `wait_until` + the upstream
/// timeout. `may_send` is asked before every upstream request (the lease check); if it says no,
/// the solve is left as it was before that step.
pub async fn run<F, Fut>(solve: &mut Solve, wait_until: u64, mut may_send: F) -> anyhow::Result<Progress>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let mut sent = false;
    loop {
        // The state before this step: what to keep if the step must not run now.
        let before = solve.snapshot();
        let now = now_ms();
        let output = solve.poll_output(now).map_err(|m| anyhow::anyhow!("engine misuse: {m}"))?;
        match output {
            Output::Solved(solution) => return Ok(Progress::Solved(solution)),
            Output::Failed(failure) => return Ok(Progress::Failed(failure)),
            Output::WaitUntil(at) if at <= wait_until => {
                spin_sdk::time::sleep(std::time::Duration::from_millis(at.saturating_sub(now))).await;
            }
            Output::WaitUntil(at) => return Ok(Progress::Pending { snapshot: before, retry_after_ms: at - now }),
            Output::Send(_) if sent && now >= wait_until => {
                return Ok(Progress::Pending { snapshot: before, retry_after_ms: 0 });
            }
            Output::Send(request) => {
                if !may_send().await? {
                    return Ok(Progress::Pending { snapshot: before, retry_after_ms: 1_000 });
                }
                sent = true;
                let fed = match upstream::send(&request).await {
                    Ok(reply) => solve.handle_response(now_ms(), request.id, reply.status, &reply.body),
                    Err(error) => solve.handle_transport_error(now_ms(), request.id, error),
                };
                fed.map_err(|m| anyhow::anyhow!("engine misuse: {m}"))?;
            }
        }
    }
}
