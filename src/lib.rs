//! A pure state machine for CaptchaAI's `in.php` / `res.php` protocol: no IO, no clock, no
//! randomness it was not given. A host drives a [`Solve`] by passing the time in, sending each
//! request it asks for at the time the request names, and feeding the results back.
//!
//! ```
//! use captchaai_engine::{Config, Output, Solve};
//!
//! let task = r#"{"type":"turnstile","sitekey":"0x4AAAAAAAB","pageurl":"https://example.com/login"}"#;
//! let mut solve = Solve::from_json(task, "0123456789abcdef0123456789abcdef", &Config::default(), 0).unwrap();
//! let mut replies = [r#"{"status":1,"request":"7412"}"#, "CAPCHA_NOT_READY", r#"{"status":1,"request":"0.TOKEN"}"#].into_iter();
//! let mut output = solve.poll_output(0).unwrap();
//! let solution = loop {
//!     output = match output {
//!         Output::Send(request) => {
//!             // A real host sleeps until request.at, then POSTs request.body to request.url.
//!             let reply = replies.next().unwrap().as_bytes();
//!             solve.handle_response(request.at, request.id, 200, reply).unwrap() // the next output
//!         }
//!         Output::Solved(solution) => break solution,
//!         Output::Failed(failure) => panic!("{failure}"),
//!     };
//! };
//! assert_eq!(solution.answer.as_str(), "0.TOKEN");
//! assert_eq!(solution.polls, 2);
//! ```
//!
//! Use it only against portals you own or are licensed to automate.
//!
//! # The public surface
//!
//! Everything a host uses, and nothing else:
//!
//! - **Driving a solve:** [`Solve`] (create, [`Solve::poll_output`], [`Solve::handle_response`],
//!   [`Solve::handle_transport_error`], snapshot and restore) and its [`Output`]; the requests
//!   it asks for, [`HttpRequest`] with its [`Body`] and [`RequestKind`]; the
//!   [`TransportError`]s a host reports back.
//! - **Keyless solves** (for hosts that store every request, such as a durable workflow's
//!   history): [`Solve::keyless`] renders requests with [`KEY_PLACEHOLDER`] where the key goes;
//!   the host sends [`HttpRequest::with_key`] of each (refused with a [`WithKeyError`]) and
//!   feeds replies back through [`ApiKey::redact`].
//! - **Inputs:** [`Task`] (with [`Upload`], [`Image`], [`ImageFormat`]), [`ApiKey`] and
//!   [`Config`] (with its field ranges, [`Limit`]).
//! - **Adaptive polling:** [`SolveTimes`], a learned model of one type's solve times
//!   ([`SolveTimes::observe`] finished solves, [`Solve::with_solve_times`] to use it; text form
//!   through `Display` / `FromStr`, refused with a [`SolveTimesError`]), and the [`Schedule`]
//!   (with its [`Gap`]) it gives a solve.
//! - **Outcomes:** [`Solution`] (with its [`Answer`]) and [`Failure`], classed by [`Class`] and
//!   [`Origin`].
//! - **Errors:** [`ValidationError`] (input refused before anything is sent), [`Misuse`] (the
//!   host broke the driving contract), [`RestoreError`] (a snapshot that cannot be restored).
//! - **Account calls and the thread gate:** the [`account`] module (`threadsinfo`,
//!   `getbalance`, [`account::ThreadGate`]).
//! - **Serving CaptchaAI's own API:** the [`endpoint`] module reads `in.php` / `res.php`
//!   requests into tasks and questions and renders the replies CaptchaAI would send.
//! - **The tables, read-only:** [`task_types`] lists every captcha type as a [`TaskType`]
//!   (method, [`TaskField`]s with their [`FieldKind`] and limits such as [`ImageLimits`], the
//!   [`AnswerShape`] and where the answer is, first wait, poll interval, deadline, token
//!   lifetime, [`ExtraRules`]); [`codes`] lists every error code as an [`ErrorCode`] (class,
//!   origin, retry-after, meaning, [`Source`]).
//!
//! # Inside (private, one concept per module; each depends only on those listed before it)
//!
//! `text` (helpers) · `codes` (the code table: classes, per-step actions, the `threadsinfo`
//! verdict, backoff) · `outcome` · `error` · `registry` (the type table) · `image` · `config` ·
//! `http` (key, requests, form and multipart bodies) · `reply` (classifying replies) · `answer` ·
//! `task` · `state` (what a snapshot persists) · `schedule` (adaptive polling's schedules and
//! their planner) · `snapshot` (the format) · `solve_times` (the adaptive model) · `solve` (the state machine) · `account` · `endpoint` (serving `in.php` and
//! `res.php`); `pool` (an allocator) and `component` (the WIT exports) in the WebAssembly build
//! only. `scripts/check-imports.py` reads this order and fails on an import of a module listed
//! later, or on a module left out.

#![warn(missing_docs)]

pub mod account;
mod answer;
mod codes;
mod config;
pub mod endpoint;
mod error;
mod http;
mod image;
mod outcome;
mod registry;
mod reply;
mod schedule;
mod snapshot;
mod solve;
mod solve_times;
mod state;
mod task;
mod text;

#[cfg(all(feature = "component", target_arch = "wasm32"))]
mod component;
#[cfg(any(test, all(feature = "component", target_arch = "wasm32")))]
mod pool;

pub use codes::{Class, ErrorCode, Origin, Source, codes};
pub use config::{Config, Limit};
pub use error::{Misuse, ValidationError};
pub use http::{ApiKey, Body, HttpRequest, KEY_PLACEHOLDER, RequestKind, TransportError, WithKeyError};
pub use image::{Image, ImageFormat};
pub use outcome::{Answer, Failure, Solution};
pub use registry::{AnswerShape, ExtraRules, FieldKind, ImageLimits, TaskField, TaskType, task_types};
pub use schedule::{Gap, Schedule};
pub use snapshot::RestoreError;
pub use solve::{Output, Solve};
pub use solve_times::{SolveTimes, SolveTimesError};
pub use task::{Task, Upload};
