//! Test host for the CaptchaAI engine: the reference wasmtime driver ([`driver`]), the CaptchaAI
//! emulator ([`emulator`]), the local Spin host ([`serve`]) and the CLI ([`cli`]) behind the
//! `host-tests` binary.

#![warn(missing_docs)]

pub mod cli;
pub mod driver;
pub mod emulator;
mod net;
pub mod serve;
