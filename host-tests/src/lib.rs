//! Test host for the CaptchaAI engine: the reference wasmtime driver ([`driver`]), the CaptchaAI
//! emulator ([`emulator`], re-exported), the local Spin host ([`serve`]) and the CLI ([`cli`]) behind the
//! `captchaai` binary.

#![warn(missing_docs)]

pub mod cli;
pub mod driver;
pub mod serve;

/// The CaptchaAI emulator, its own crate (`captchaai-emulator`, no wasmtime) re-exported here.
pub use captchaai_emulator as emulator;
