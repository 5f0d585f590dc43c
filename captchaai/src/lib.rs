//! The CaptchaAI solve engine for Rust programs: runs the engine component
//! (`captchaai_engine.wasm`, the same binary every other host runs) with wasmtime, sends its
//! requests over real HTTP and sleeps on real (optionally scaled) timers.
//!
//! It holds no protocol knowledge: every decision (what to send, how long to wait, what a reply
//! means, when to stop) comes from the engine. Many solves run concurrently as resources inside
//! one instance. A solve's state only changes when a result is fed back, so the [`Runner`] keeps
//! its snapshot once at creation and after each result; if the instance traps, it makes a fresh
//! instance, restores every in-flight solve from its snapshot (a request that was out is sent
//! again) and carries on.
//!
//! The engine component is embedded in this crate when it is built (from
//! `target/component/captchaai_engine.wasm`, made by `cargo xtask component`, or the file named by
//! `$CAPTCHAAI_ENGINE_WASM`): [`EngineHost::embedded`] loads it.
//!
//! Use it only against portals you own or are licensed to automate.

#![warn(missing_docs)]

mod clock;
mod component;
mod gate;
mod http;
mod runner;

pub use clock::Clock;
pub use component::endpoint;
pub use component::{
    Admission, Answer, Config, ENGINE_WASM, EngineHost, EngineInstance, Failure, FailureClass, FailureOrigin,
    HttpRequest, HttpResponse, LoadStats, Misuse, Output, RequestBody, RequestKind, RestoreError, Solution,
    SolveTimesError, ThreadsInfo, TransportError,
};
pub use gate::Gate;
pub use http::HttpClient;
pub use runner::{DEFAULT_MAX_MEMORY, FirstWait, Runner, RunnerOptions, RunnerStats, SolveReport};
/// The handle of a solve inside an [`EngineInstance`] (a component-model resource).
pub use wasmtime::component::ResourceAny;
