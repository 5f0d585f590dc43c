//! Drives a solve until it ends or the request's wait runs out. The engine decides everything:
//! what to send and when (each request's `at`), what a reply means, when to give up.

use crate::clock::{now_ms, sleep_until};
use crate::engine::{Failure, HttpRequest, Output, Solution, Solve};
use crate::kv::Kv;
use crate::metrics;
use crate::upstream;

/// Where a solve stands when the request has to answer.
pub enum Progress {
    Solved(Solution),
    Failed(Failure),
    /// Still in flight (its state as of `snapshot-state` now): ask the client to come back in
    /// `retry_after_ms`. `due` is when the engine's next request is due (epoch ms), if the run
    /// stopped only because the wait ends before it.
    Pending {
        retry_after_ms: u64,
        due: Option<u64>,
    },
    /// A checkpoint found the record changed: the solve was deleted or taken over by another
    /// driver after this one's lease; this driver stops.
    Lost,
}

/// Margin kept between the end of an upstream request and the end of the lease, ms.
pub const LEASE_MARGIN_MS: u64 = 1_000;

/// What the caller keeps of a run. Each returns false when the caller lost the solve (deleted,
/// or taken over): the run stops.
pub trait Checkpoint {
    /// `request` is about to be sent.
    fn sending(&mut self, solve: &Solve, request: &HttpRequest) -> anyhow::Result<bool>;
    /// A result came back and the solve goes on: its `snapshot-state` is worth keeping.
    fn answered(&mut self, solve: &Solve) -> anyhow::Result<bool>;
}

fn misuse(m: crate::engine::Misuse) -> anyhow::Error {
    anyhow::anyhow!("engine misuse: {m:?}")
}

/// The solve's ending, if the engine has ended it by now (its deadline passed before its next
/// request went out, or it ended before): asked without sending anything.
pub fn ended(solve: &Solve) -> anyhow::Result<Option<Progress>> {
    Ok(match solve.poll_output(now_ms()).map_err(misuse)? {
        Output::Solved(solution) => Some(Progress::Solved(solution)),
        Output::Failed(failure) => Some(Progress::Failed(failure)),
        Output::Send(_) => None,
    })
}

/// Runs `solve` until it ends, or until its next request is due after `wait_until` (epoch ms).
/// An upstream request only starts by `wait_until` (the first one that is due may always start,
/// so even `wait=0` makes progress) and only if it ends, timeout included, before
/// `lease_until`, the end of this driver's lease: so the caller answers by `wait_until` + the
/// upstream timeout, and no other driver can take the solve while a request is out.
///
/// Before each send `checkpoint` hears of the request, and after every result that does not
/// end the solve it stores the engine's `snapshot-state`; if either reports the lease lost, the
/// run stops. The engine's state does not change between handing out a request and being
/// given its reply, so the state a pending answer keeps is the one before anything was sent.
pub async fn run(
    solve: &Solve,
    wait_until: u64,
    lease_until: u64,
    kv: &Kv,
    checkpoint: &mut impl Checkpoint,
) -> anyhow::Result<Progress> {
    let mut sent = false;
    let mut output = solve.poll_output(now_ms()).map_err(misuse)?;
    loop {
        let request = match output {
            Output::Solved(solution) => return Ok(Progress::Solved(solution)),
            Output::Failed(failure) => return Ok(Progress::Failed(failure)),
            Output::Send(request) => request,
        };
        let now = now_ms();
        // Due already counts as due by `wait_until`: a request the engine makes due at the time
        // it is asked (the last poll after the deadline) is later than a `wait=0` caller's
        // `wait_until` by the time it takes to ask.
        if (request.at > wait_until && request.at > now) || (sent && now >= wait_until) {
            return Ok(Progress::Pending { retry_after_ms: request.at.saturating_sub(now), due: Some(request.at) });
        }
        sleep_until(request.at).await;
        if now_ms() + request.timeout_ms + LEASE_MARGIN_MS > lease_until {
            return Ok(Progress::Pending { retry_after_ms: 1_000, due: None });
        }
        if !checkpoint.sending(solve, &request)? {
            return Ok(Progress::Lost);
        }
        sent = true;
        let reply = upstream::send(&request).await;
        metrics::upstream(kv, request.kind, reply.is_ok());
        output = match reply {
            Ok(reply) => solve.handle_response(now_ms(), request.id, &reply),
            Err(error) => solve.handle_transport_error(now_ms(), request.id, error),
        }
        .map_err(misuse)?;
        if matches!(output, Output::Send(_)) && !checkpoint.answered(solve)? {
            return Ok(Progress::Lost);
        }
    }
}
