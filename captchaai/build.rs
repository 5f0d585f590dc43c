//! Embeds the engine component: `$CAPTCHAAI_ENGINE_WASM` if set, else
//! `component/captchaai_engine.wasm` under `$CARGO_TARGET_DIR` or the workspace's `target/`
//! (`cargo xtask component` writes it there). The path reaches the crate as
//! `CAPTCHAAI_ENGINE_WASM_EMBEDDED`.

use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-env-changed=CAPTCHAAI_ENGINE_WASM");
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_DIR");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let wasm = match std::env::var_os("CAPTCHAAI_ENGINE_WASM") {
        Some(path) => PathBuf::from(path),
        None => std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .filter(|target| target.join("component/captchaai_engine.wasm").exists())
            .unwrap_or_else(|| manifest_dir.join("../target"))
            .join("component/captchaai_engine.wasm"),
    };
    let wasm = std::path::absolute(&wasm).unwrap_or(wasm);
    if !wasm.exists() {
        println!(
            "cargo::error=the engine component {} is missing: build it first with `cargo xtask component` \
             (in the repository root), or point CAPTCHAAI_ENGINE_WASM at one",
            wasm.display()
        );
        return;
    }
    println!("cargo::rerun-if-changed={}", wasm.display());
    println!("cargo::rustc-env=CAPTCHAAI_ENGINE_WASM_EMBEDDED={}", wasm.display());
}
