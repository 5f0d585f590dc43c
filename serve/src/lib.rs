//! A local Spin host: serves one spin-sdk 7 HTTP component (`wasi:http/handler@0.3.0`) the way
//! Spin ≥ 4.1 would, for tests and local runs on a machine without the Spin CLI (the
//! `captchaai-serve` binary; `scripts/run.sh` uses it when no Spin CLI is present).
//!
//! * wasmtime with component-model async; WASI p2 (Rust std's imports) and p3; wasi-http p3.
//! * `spin:variables@3.0.0`: values from [`ServeConfig::variables`] (flags) over
//!   `SPIN_VARIABLE_<NAME>` entries of [`ServeConfig::env`], or, with a manifest, exactly the
//!   component's `[component.NAME.variables]` templates resolved against them and `[variables]`
//!   defaults. Values are never printed.
//! * `wasi:keyvalue/{store,atomics,batch}@0.2.0-draft2` (as Spin 4.1) and `spin:key-value@3.0.0`:
//!   the `default` store, shared by all requests: in memory, SQLite or Redis ([`KvBackend`],
//!   [`kv::KvStore`]); increment and compare-and-swap are atomic across processes.
//! * `allowed_outbound_hosts` enforced on every outbound request (`HttpRequestDenied`, logged
//!   with scheme, host and port only).
//! * hyper HTTP/1.1 on [`ServeConfig::listen`], one task per connection; the component is
//!   compiled once (with an optional on-disk cache), pre-instantiated once, and every request
//!   gets a fresh `Store` and instance ([`Allocation`]: pooled by default). Request and response
//!   bodies are streamed. A guest error or trap gives a JSON 500 and a log line (with variable
//!   values redacted); a full instance pool gives a JSON 503.
//! * Hardening ([`Limits`]): header-read timeout, body idle timeout and size limit, a
//!   per-request deadline enforced with epoch interruption (a guest stuck in a loop is trapped
//!   and its instance freed), a connection limit, JSON bodies (`{"code","class":"host",
//!   "message","retry_after_s"}`) for the host's own 413/414/431/500/503, and a graceful
//!   shutdown ([`Server::shutdown`]). HTTP/1.0 clients get `Content-Length` or a
//!   close-delimited body (hyper). `HEAD` goes to the guest like any method (as in Spin; the edge
//!   app answers it for its GET routes; hyper never sends a body for it).
//!
//! Differences from Spin: every route goes to the one component (no `[[trigger.http]]` routing;
//! the guest sees `spin-matched-route: /...`); no `self` requests, no CIDR ranges in
//! `allowed_outbound_hosts`, key-value stores other than `default` are not supported;
//! `wasi:keyvalue` `list-keys` returns all keys at once; an
//! instance serves exactly one request (Spin 4 may reuse an instance for several); outbound
//! requests open a new connection each time.

pub mod cli;
mod config;
mod handler;
mod keyvalue;
pub mod kv;
mod load;
pub mod manifest;
mod net;
pub mod outbound;
mod server;
mod spin;
mod state;
pub mod variables;

pub use config::{Allocation, Limits, LoadStats, ServeConfig};
pub use kv::{KvBackend, KvStore};
pub use manifest::Manifest;
pub use outbound::AllowedHosts;
pub use server::Server;
pub use variables::{ComponentVariables, Redactor};
