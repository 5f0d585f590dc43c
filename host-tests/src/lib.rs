//! The wasmtime-based test host. This crate has no library code: its end-to-end tests live in
//! `tests/` (the engine component through the `captchaai` driver, the `captchaai-serve` host, the
//! edge app under that host and under real Spin), with their shared support in `tests/support`.
