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

#![warn(missing_docs)]

pub mod account;
mod answer;
pub mod codes;
mod config;
mod error;
mod http;
mod outcome;
pub mod registry;
mod reply;
pub mod schema;
mod snapshot;
mod solve;
mod task;
mod text;

#[cfg(all(feature = "component", target_arch = "wasm32"))]
mod component;
#[cfg(any(test, all(feature = "component", target_arch = "wasm32")))]
mod pool;

pub use codes::Class;
pub use config::{Config, DEFAULT_BASE_URL};
pub use error::{Misuse, RestoreError, ValidationError};
pub use http::{ApiKey, Body, HttpRequest, RequestKind, TransportError};
pub use outcome::{Answer, Failure, Solution};
pub use snapshot::{FORMAT as SNAPSHOT_FORMAT, VERSION as SNAPSHOT_VERSION};
pub use solve::{Output, Solve};
pub use task::{Image, ImageFormat, Task, Upload};
