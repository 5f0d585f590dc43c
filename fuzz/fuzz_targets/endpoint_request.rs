#![no_main]
//! See `captchaai_engine_fuzz::endpoint_request`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| captchaai_engine_fuzz::endpoint_request(data));
