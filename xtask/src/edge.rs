//! `cargo xtask edge`: builds the Spin edge app (`edge/`, wasm32-wasip2, release) and composes it
//! with the engine component at build time, writing `target/edge/captchaai_edge.wasm`, the file
//! spin.toml serves.
//!
//! The edge app imports `captchaai:engine/{types,engine,account}@0.3.0` through WIT and contains
//! no engine code. Composition (wac-graph's `plug`) instantiates the engine component, wires its
//! exports into those imports and re-exports the edge's `wasi:http/handler`. wac-graph embeds each
//! instantiated component as a raw nested-component section, so the engine inside the result is
//! `target/component/captchaai_engine.wasm` byte for byte: the same binary every other host runs
//! (checked here, and by host-tests/tests/edge_composition.rs).
//!
//! Why build-time composition rather than Spin's `[component.x.dependencies]`, which composes at
//! load time:
//! - One self-contained file that imports only WASI and `spin:*`: it runs on any Spin 4.1+, on the
//!   project's own `captchaai-serve` (which, like `wasmtime serve`, knows nothing of component
//!   dependencies), and on platforms that do not implement dependencies themselves (SpinKube's
//!   containerd shim never did; `spin registry push` composes before pushing for that reason).
//! - What is tested is what is deployed: the composed bytes are checked (imports, the embedded
//!   engine) once, here, instead of trusting each runtime's composer.
//! - The engine component is a build product (`cargo xtask component`), not a registry package,
//!   so a load-time dependency would be a path into `target/` in the manifest anyway.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

use anyhow::{Context, Result, bail};
use wac_graph::types::Package;
use wac_graph::{CompositionGraph, EncodeOptions};
use wasmparser::{Parser, Payload};

/// The only import namespaces the composed app may have: what Spin provides.
const ALLOWED_IMPORTS: &[&str] = &["wasi:", "spin:"];

pub fn edge() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("workspace root")?.to_path_buf();
    let target = env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let engine_path = target.join("component/captchaai_engine.wasm");
    let engine = fs::read(&engine_path)
        .with_context(|| format!("reading {} (build it first: `cargo xtask component`)", engine_path.display()))?;

    // The edge crate is its own workspace (wasm32-wasip2 only), with its own target dir.
    let edge_target = env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("edge/target"));
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&root)
        .args(["build", "--quiet", "--manifest-path", "edge/Cargo.toml", "--target", "wasm32-wasip2", "--release"])
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("building the edge app for wasm32-wasip2 failed");
    }
    let app_path = edge_target.join("wasm32-wasip2/release/captchaai_edge.wasm");
    let app = fs::read(&app_path).with_context(|| format!("reading {}", app_path.display()))?;

    let composed = compose(&engine, &app)?;
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&composed)
        .context("the composed edge app does not validate")?;

    let outline = Outline::of(&composed)?;
    let foreign: Vec<&String> =
        outline.imports.iter().filter(|name| !ALLOWED_IMPORTS.iter().any(|p| name.starts_with(p))).collect();
    if !foreign.is_empty() {
        bail!("the composed edge app imports {foreign:?}; it may import only what Spin provides ({ALLOWED_IMPORTS:?})");
    }
    if !outline.exports.iter().any(|name| name.starts_with("wasi:http/handler@")) {
        bail!("the composed edge app does not export wasi:http/handler (exports: {:?})", outline.exports);
    }
    let verbatim = outline.components.iter().filter(|range| composed[(*range).clone()] == engine[..]).count();
    if verbatim != 1 {
        bail!("the composed edge app embeds the engine component {verbatim} times byte for byte; expected once");
    }

    let out_dir = target.join("edge");
    fs::create_dir_all(&out_dir)?;
    let out = out_dir.join("captchaai_edge.wasm");
    crate::write_if_changed(&out, &composed)?;
    println!("imports: {}", outline.imports.join(", "));
    println!("exports: {}", outline.exports.join(", "));
    println!(
        "edge app: {} ({} bytes) + engine: {} ({} bytes, embedded verbatim)",
        app_path.display(),
        app.len(),
        engine_path.display(),
        engine.len()
    );
    println!("composed: {} ({} bytes, {:.1} KiB)", out.display(), composed.len(), composed.len() as f64 / 1024.0);
    Ok(())
}

/// Plugs the engine's exports into the app's `captchaai:engine` imports; everything else the app
/// imports stays an import of the result, and the app's exports are re-exported.
fn compose(engine: &[u8], app: &[u8]) -> Result<Vec<u8>> {
    let mut graph = CompositionGraph::new();
    let engine = Package::from_bytes("captchaai:engine", None, engine.to_vec(), graph.types_mut())
        .context("loading the engine component")?;
    let engine = graph.register_package(engine)?;
    let app = Package::from_bytes("captchaai:edge", None, app.to_vec(), graph.types_mut())
        .context("loading the edge app component")?;
    let app = graph.register_package(app)?;
    wac_graph::plug(&mut graph, vec![engine], app).context("plugging the engine into the edge app")?;
    let options = EncodeOptions { define_components: true, validate: true, processor: None };
    graph.encode(options).context("encoding the composed edge app")
}

/// A component's top-level import and export names and the byte ranges of its directly nested
/// components.
struct Outline {
    imports: Vec<String>,
    exports: Vec<String>,
    components: Vec<std::ops::Range<usize>>,
}

impl Outline {
    fn of(component: &[u8]) -> Result<Outline> {
        let mut outline = Outline { imports: Vec::new(), exports: Vec::new(), components: Vec::new() };
        // Nested modules and components are parsed inline; only depth 0 is the outer component.
        let mut depth = 0usize;
        for payload in Parser::new(0).parse_all(component) {
            match payload? {
                Payload::ComponentImportSection(reader) if depth == 0 => {
                    for import in reader {
                        outline.imports.push(import?.name.full_name().into_owned());
                    }
                }
                Payload::ComponentExportSection(reader) if depth == 0 => {
                    for export in reader {
                        outline.exports.push(export?.name.full_name().into_owned());
                    }
                }
                Payload::ComponentSection { unchecked_range, .. } => {
                    if depth == 0 {
                        outline.components.push(unchecked_range.start as usize..unchecked_range.end as usize);
                    }
                    depth += 1;
                }
                Payload::ModuleSection { .. } => depth += 1,
                Payload::End(_) => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        Ok(outline)
    }
}
