//! Test host for the CaptchaAI engine. Today: the CaptchaAI emulator ([`emulator`]) and the
//! CLI plumbing ([`cli`]) behind the `host-tests` binary.

#![warn(missing_docs)]

pub mod cli;
pub mod emulator;
