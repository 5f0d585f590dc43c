//! The plan's thread count, which sizes the thread budget (`crate::budget`): read from
//! `threadsinfo` through the engine (`threads-info-request`, `parse-threads-info`) and cached in
//! `threads/plan` for [`PLAN_TTL_MS`], so instances sharing the store read it about once a
//! minute between them.

use serde::{Deserialize, Serialize};

use crate::clock::{now_ms, sleep_until};
use crate::engine::{self, Failure};
use crate::kv::Kv;
use crate::metrics;
use crate::settings::Settings;
use crate::upstream;

/// How long a plan size read from `threadsinfo` is used before it is read again, ms.
pub const PLAN_TTL_MS: u64 = 60_000;

/// Where the cached plan size is kept.
pub const PLAN_KEY: &str = "threads/plan";

/// The value at [`PLAN_KEY`].
#[derive(Serialize, Deserialize)]
struct Plan {
    exp: u64,
    threads: u64,
}

/// The plan's threads: cached, else read through the engine. When reading fails, a stale
/// cached value is used; with none, the engine's failure is the answer.
pub async fn threads(kv: &Kv, settings: &Settings) -> anyhow::Result<Result<u64, Failure>> {
    let cached = kv.get_json::<Plan>(PLAN_KEY)?;
    let now = now_ms();
    if let Some(plan) = &cached
        && plan.exp > now
    {
        return Ok(Ok(plan.threads));
    }
    match threads_info(kv, settings).await? {
        Ok(info) => {
            kv.set_json(PLAN_KEY, &Plan { exp: now_ms() + PLAN_TTL_MS, threads: info.threads })?;
            Ok(Ok(info.threads))
        }
        Err(failure) => Ok(cached.map(|plan| plan.threads).ok_or(failure)),
    }
}

/// `threadsinfo` through the engine, uncached (counted in the metrics as an upstream request).
pub async fn threads_info(kv: &Kv, settings: &Settings) -> anyhow::Result<Result<engine::ThreadsInfo, Failure>> {
    let request = match engine::account::threads_info_request(&settings.api_key, &settings.config) {
        Ok(request) => request,
        Err(failure) => return Ok(Err(failure)),
    };
    sleep_until(request.at).await;
    let reply = upstream::send(&request).await;
    metrics::upstream(kv, request.kind, reply.is_ok());
    Ok(engine::account::parse_threads_info(&reply))
}
