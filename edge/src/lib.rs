//! The CaptchaAI edge gateway: a Spin HTTP component that keeps the CaptchaAI key at the edge and
//! gives every client the same long-poll solving API and error classes.
//!
//! Every protocol decision is the engine's: this crate imports the engine component through WIT
//! (`captchaai:engine@0.3.0`, bound in the private `engine` module) and moves bytes between
//! clients, the engine, CaptchaAI and Spin's key-value store, sleeping until each request's `at`.
//! It holds no engine code: `cargo xtask edge` composes it with the engine component's exact
//! bytes into one component that imports only WASI and `spin:*`.
//!
//! Routes (all `/v1` routes need `Authorization: Bearer <token>`; see `openapi.json`):
//! - `POST /v1/solve[?wait=S]`: start a solve from a task JSON body; 200 with the solution if it
//!   is solved within the wait, else 202 with an id and `Retry-After`.
//! - `GET /v1/solve/{id}[?wait=S]`: continue that solve from its snapshot; same answers. Once
//!   the solve has ended, its response is repeated until it expires.
//! - `DELETE /v1/solve/{id}`: remove the solve and its stored response.
//! - `GET /v1/threads`: the plan's threads and how many are busy.
//! - `GET|POST /in.php`, `GET|POST /res.php`: CaptchaAI's own API for clients written for it,
//!   with a client token as their `key` (`classic`).
//! - `GET /healthz`: liveness (and the variables usable), no auth.
//! - `GET /readyz`: readiness: one read of the key-value store, no auth.

mod api;
mod auth;
mod budget;
mod classic;
mod clock;
mod drive;
mod ids;
mod kv;
mod lifecycle;
mod metrics;
mod plan;
mod request;
mod settings;
mod sweep;
mod times;
mod upstream;

/// The engine component's interfaces, imported through WIT (`wit/edge.wit` on `../wit`).
mod engine {
    wit_bindgen::generate!({
        path: ["../wit", "wit"],
        world: "captchaai:edge/edge",
        generate_all,
    });

    pub use captchaai::engine::engine::{Solve, SolveTimes, check_config, solution_json};
    pub use captchaai::engine::types::*;
    pub use captchaai::engine::{account, endpoint};

    /// `wasi:keyvalue` 0.2.0-draft2 (store, atomics): see `crate::kv`.
    pub mod kv {
        pub use super::wasi::keyvalue::{atomics, store};
    }
}

use spin_sdk::http::Request;

#[spin_sdk::http_service]
async fn handle(request: Request) -> anyhow::Result<http::Response<spin_sdk::http::FullBody<bytes::Bytes>>> {
    Ok(api::handle(request).await)
}
