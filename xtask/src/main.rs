//! `cargo xtask component`: builds the engine for wasm32-unknown-unknown, optimises the core module
//! with binaryen's `wasm-opt -Oz`, wraps it into a component (wit-component), drops the debug
//! name section, validates it, prints its WIT, and fails if the component imports anything or
//! exceeds the size budget. Writes `target/component/captchaai_engine.wasm` (and `.wit`).
//!
//! `cargo xtask edge` (edge.rs): builds the Spin edge app and composes it with those exact engine
//! bytes into `target/edge/captchaai_edge.wasm`.
//!
//! `cargo xtask openapi` (openapi.rs): writes the per-type task schemas (schema.rs, derived from
//! the engine's read-only type listing) into `edge/openapi.json` (`--check`: fails if it is stale).
//!
//! `cargo xtask python-types` (python_types.rs): writes the Python package's task dataclasses
//! (`bindings/python/src/captchaai_engine/tasks.py`) from the same listing (`--check` likewise).
//!
//! `cargo xtask ts-types` (ts_types.rs): writes the JavaScript package's task types
//! (`bindings/js/src/tasks.d.ts`) from the same listing (`--check`: fails if they are stale).
//!
//! `cargo xtask sizes [--check | --write]` (sizes.rs): BENCHMARKS.md's size rows from the build.
//!
//! `cargo xtask dist [python|npm|edge|cli ...] [--cli-profile release|dev]` (dist.rs): builds
//! the artifacts users install into `dist/`: the Python wheel and sdist, the npm tarball, the
//! edge bundle (`dist/edge/`, served by `spin up` from that folder) and the `captchaai` CLI
//! binary (default: all of them).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

use anyhow::{Context, Result, bail};
use wit_component::{ComponentEncoder, DecodedWasm, WitPrinter};

mod dist;
mod edge;
mod generated;
mod openapi;
mod python_types;
mod schema;
mod sizes;
mod ts_types;

/// Stops a generator at a table value it cannot render yet (the engine's table enums are
/// `#[non_exhaustive]`): the message says what to teach it.
pub(crate) fn untaught(what: impl std::fmt::Debug, generator: &str) -> ! {
    panic!("xtask: {generator} cannot render {what:?} yet: teach it (xtask/src/{generator}.rs)")
}

/// The component must stay under this many bytes.
const SIZE_BUDGET: usize = 512 * 1024;

fn main() -> Result<()> {
    match env::args().nth(1).as_deref() {
        Some("component") => component(),
        // The edge app composed with the engine component that `component` wrote (see edge.rs).
        Some("edge") => edge::edge(),
        // Every artifact users install, built into dist/ (see dist.rs).
        Some("dist") => dist::dist(&env::args().skip(2).collect::<Vec<_>>()),
        Some("openapi") => openapi::openapi(),
        Some("python-types") => python_types::python_types(),
        Some("ts-types") => ts_types::ts_types(),
        Some("sizes") => sizes::sizes(&env::args().skip(2).collect::<Vec<_>>()),
        _ => {
            bail!(
                "usage: cargo xtask component | cargo xtask edge | cargo xtask openapi [--check | --validate-tasks] | cargo xtask ts-types [--check] | cargo xtask python-types [--check] | cargo xtask sizes [--check | --write] | cargo xtask dist [python|npm|edge|cli ...] [--cli-profile release|dev]"
            )
        }
    }
}

fn component() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("workspace root")?.to_path_buf();
    let target = env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&root)
        .args([
            "build",
            "--quiet",
            "--lib",
            "-p",
            "captchaai-engine",
            "--features",
            "component",
            "--target",
            "wasm32-unknown-unknown",
            "--profile",
            "wasm",
        ])
        // 128-bit SIMD (memchr, UTF-8 checks, copies): -2.9% instructions per canned solve
        // through wasmtime (88.5k -> 86.0k, callgrind). Every host we ship runs it (wasmtime,
        // wasmtime-py, Spin, Node's V8 under jco). Set here so that no RUSTFLAGS change the binary.
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+simd128")
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("building the engine for wasm32-unknown-unknown failed");
    }
    let core_path = target.join("wasm32-unknown-unknown/wasm/captchaai_engine.wasm");
    let out_dir = target.join("component");
    fs::create_dir_all(&out_dir)?;
    // A name of this process's own: CI runs stages side by side, each of which may run this.
    let optimised = out_dir.join(format!("captchaai_engine.core.{}.wasm", std::process::id()));
    wasm_opt(&root, &core_path, &optimised)?;
    let core = fs::read(&optimised).with_context(|| format!("reading {}", optimised.display()))?;
    fs::remove_file(&optimised)?;
    let component = ComponentEncoder::default().module(&core)?.validate(true).encode()?;
    let component = without_custom_section(&component, "component-name")?;
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&component)
        .context("the component does not validate")?;

    let DecodedWasm::Component(resolve, world_id) = wit_component::decode(&component)? else {
        bail!("the output is not a component");
    };
    let world = &resolve.worlds[world_id];
    let mut printer = WitPrinter::default();
    let package = world.package.context("the decoded world has no package")?;
    let nested: Vec<_> = resolve.packages.iter().map(|(id, _)| id).filter(|id| *id != package).collect();
    printer.print(&resolve, package, &nested)?;
    let wit = printer.output.to_string();

    let out = out_dir.join("captchaai_engine.wasm");
    // Unchanged bytes keep their mtime: `captchaai`'s build.rs embeds this file, and a rewrite
    // alone would make cargo rebuild that crate (about 1.5 min in release on 2 cores).
    write_if_changed(&out, &component)?;
    write_if_changed(&out_dir.join("captchaai_engine.wit"), wit.as_bytes())?;

    println!("{}", world_summary(&wit));
    let imports: Vec<String> = world.imports.keys().map(|k| resolve.name_world_key(k)).collect();
    if !imports.is_empty() {
        bail!("the component imports {imports:?}; it must import nothing");
    }
    println!("imports: none");
    let exports: Vec<String> = world.exports.keys().map(|k| resolve.name_world_key(k)).collect();
    if !exports.iter().any(|e| e.starts_with("captchaai:engine/engine")) {
        bail!(
            "the component does not export the engine interface (exports: {exports:?}); was it built with `--features component`?"
        );
    }
    println!(
        "component: {} ({} bytes, {:.1} KiB; budget {} KiB)",
        out.display(),
        component.len(),
        kib(component.len()),
        SIZE_BUDGET / 1024
    );
    if component.len() > SIZE_BUDGET {
        bail!("the component is {:.1} KiB, over the {} KiB budget", kib(component.len()), SIZE_BUDGET / 1024);
    }
    Ok(())
}

/// Writes `bytes` to `path` unless it already holds exactly them (then its mtime is kept). The
/// new file replaces the old one whole (written beside it, then renamed): a host loading it while
/// another stage rebuilds never reads half a file.
pub(crate) fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<()> {
    if fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    let partial = path.with_extension(format!("partial.{}", std::process::id()));
    fs::write(&partial, bytes).with_context(|| format!("writing {}", partial.display()))?;
    fs::rename(&partial, path).with_context(|| format!("renaming {} to {}", partial.display(), path.display()))
}

/// Features rustc 1.95 emits for wasm32-unknown-unknown (plus `simd128`, enabled above);
/// binaryen needs them spelled out.
const WASM_FEATURES: &[&str] = &[
    "--enable-bulk-memory",
    "--enable-nontrapping-float-to-int",
    "--enable-sign-ext",
    "--enable-multivalue",
    "--enable-reference-types",
    "--enable-mutable-globals",
    "--enable-simd",
];

/// Runs `wasm-opt` (from PATH, or from an npm install of `binaryen` in the workspace).
/// The wasm-opt pass level of the chosen build (benches/component-variants.sh measures the
/// others); the `ENGINE_WASM_OPT` variable overrides it (`-Oz`, `-O3`, ... or `none`) for
/// measuring variants, as `CARGO_PROFILE_WASM_OPT_LEVEL` does rustc's opt-level.
const WASM_OPT_LEVEL: &str = "-Oz";

fn wasm_opt(root: &Path, input: &Path, output: &Path) -> Result<()> {
    let level = env::var("ENGINE_WASM_OPT").unwrap_or_else(|_| WASM_OPT_LEVEL.to_owned());
    if level == "none" {
        fs::copy(input, output).with_context(|| format!("copying {}", input.display()))?;
        return Ok(());
    }
    let local = root.join("node_modules/.bin/wasm-opt");
    let program = if local.exists() { local } else { PathBuf::from("wasm-opt") };
    let status =
        Command::new(&program).arg(&level).args(WASM_FEATURES).arg(input).arg("-o").arg(output).status().with_context(
            || {
                format!(
                    "running {}: install binaryen (`apt-get install binaryen` or `npm install binaryen`)",
                    program.display()
                )
            },
        )?;
    if !status.success() {
        bail!("wasm-opt failed on {}", input.display());
    }
    Ok(())
}

/// The component without the named top-level custom section (sections are copied as bytes).
fn without_custom_section(component: &[u8], name: &str) -> Result<Vec<u8>> {
    let mut out = component.get(..8).context("not a wasm binary")?.to_vec();
    let mut pos = 8;
    while pos < component.len() {
        let start = pos;
        let id = component[pos];
        let (size, after) = read_leb128(component, pos + 1)?;
        let end = after.checked_add(size).filter(|e| *e <= component.len()).context("truncated section")?;
        let dropped = id == 0 && {
            let (len, at) = read_leb128(component, after)?;
            component.get(at..at + len) == Some(name.as_bytes())
        };
        if !dropped {
            out.extend_from_slice(&component[start..end]);
        }
        pos = end;
    }
    Ok(out)
}

fn read_leb128(bytes: &[u8], mut pos: usize) -> Result<(usize, usize)> {
    let mut value = 0usize;
    for shift in (0..35).step_by(7) {
        let byte = *bytes.get(pos).context("truncated LEB128")?;
        pos += 1;
        value |= usize::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok((value, pos));
        }
    }
    bail!("LEB128 too long")
}

/// The `world ... { ... }` block of the printed WIT.
fn world_summary(wit: &str) -> String {
    let start = wit.find("world ").unwrap_or(0);
    let end = wit[start..].find('}').map(|i| start + i + 1).unwrap_or(wit.len());
    wit[start..end].to_owned()
}

fn kib(bytes: usize) -> f64 {
    bytes as f64 / 1024.0
}
