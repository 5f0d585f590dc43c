//! Support shared by the end-to-end tests; each test file uses part of it.
//!
//! Tests that need a real component this machine may lack (real Spin, a real Redis) are
//! `#[ignore]`d with a reason, so a plain `cargo test` reports them as ignored, never as passed.
//! `scripts/test.sh` (CI) installs both and runs them with `--include-ignored`; there a missing
//! component fails the test with a message saying how to install it.
#![allow(dead_code)]

pub mod edge_client;
pub mod openapi;
pub mod redis;
pub mod spin;
pub mod wait;
