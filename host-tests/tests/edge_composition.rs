//! The edge app runs the engine component itself: `cargo xtask edge` composes the Spin app
//! (edge/, which imports `captchaai:engine` through WIT) with `target/component/captchaai_engine.wasm`,
//! and the result must carry that file byte for byte as a nested component and import nothing
//! but what Spin provides.
//!
//! Needs both artifacts: `cargo xtask component && cargo xtask edge` (scripts/setup.sh `build_all`).

use std::ops::Range;
use std::path::PathBuf;

use wasmparser::{Parser, Payload};

fn artifact(relative: &str, build: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(relative);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; build it with `{build}`", path.display()))
}

fn engine() -> Vec<u8> {
    artifact("target/component/captchaai_engine.wasm", "cargo xtask component")
}

fn edge() -> Vec<u8> {
    artifact("target/edge/captchaai_edge.wasm", "cargo xtask component && cargo xtask edge")
}

/// What a component binary holds at its top level, and every component nested in it at any depth.
#[derive(Default)]
struct Outline {
    imports: Vec<String>,
    exports: Vec<String>,
    /// Nested components at any depth, in binary order: how deep (1 = directly in the outer
    /// component) and their byte range.
    components: Vec<(usize, Range<usize>)>,
    /// Core modules at any depth.
    modules: usize,
}

fn outline(bytes: &[u8]) -> Outline {
    assert!(Parser::is_component(bytes), "not a component binary");
    let mut outline = Outline::default();
    // Nested modules and components are parsed inline; depth 0 is the outer component.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.expect("the binary parses") {
            Payload::ComponentImportSection(reader) if depth == 0 => {
                outline.imports.extend(reader.into_iter().map(|i| i.unwrap().name.full_name().into_owned()));
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                outline.exports.extend(reader.into_iter().map(|e| e.unwrap().name.full_name().into_owned()));
            }
            Payload::ComponentSection { unchecked_range, .. } => {
                depth += 1;
                outline.components.push((depth, unchecked_range.start as usize..unchecked_range.end as usize));
            }
            Payload::ModuleSection { .. } => {
                outline.modules += 1;
                depth += 1;
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    outline
}

#[test]
fn the_edge_app_embeds_the_engine_component_byte_for_byte() {
    let (engine, edge) = (engine(), edge());
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&edge)
        .expect("the composed edge app validates");
    let nested = outline(&edge).components;
    let identical = nested.iter().filter(|(_, r)| edge[r.clone()] == engine[..]).count();
    assert_eq!(
        identical,
        1,
        "exactly one of the {} nested components must be target/component/captchaai_engine.wasm ({} bytes) byte for \
         byte; a mismatch means the edge app was composed from another engine build (run `cargo xtask edge`)",
        nested.len(),
        engine.len()
    );
    // The composition itself holds two components: the engine and the edge app (which nests
    // its own, e.g. wasm-component-ld's adapters, but never another copy of the engine).
    let top: Vec<&Range<usize>> = nested.iter().filter(|(depth, _)| *depth == 1).map(|(_, r)| r).collect();
    assert_eq!(top.len(), 2, "the composition holds the engine and the edge app, nothing else");
    assert!(top.iter().any(|r| edge[(*r).clone()] == engine[..]), "the engine sits directly in the composition");
    let app = top.iter().find(|r| edge[(**r).clone()] != engine[..]).unwrap();
    let app = outline(&edge[(*app).clone()]);
    assert!(
        app.imports.iter().any(|i| i == "captchaai:engine/engine@0.3.0"),
        "the edge app gets the engine through its WIT import: {:?}",
        app.imports
    );
}

#[test]
fn the_edge_app_imports_only_what_spin_provides() {
    let edge = outline(&edge());
    assert!(!edge.imports.is_empty());
    for import in &edge.imports {
        assert!(!import.starts_with("captchaai:"), "the engine import {import} is not satisfied inside the app");
        assert!(import.starts_with("wasi:") || import.starts_with("spin:"), "{import} is not provided by Spin");
    }
    assert_eq!(edge.exports, ["wasi:http/handler@0.3.0"]);
    // The engine component itself imports nothing.
    assert!(outline(&engine()).imports.is_empty());
}

#[test]
fn the_edge_crate_does_not_compile_the_engine() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let lock = std::fs::read_to_string(root.join("edge/Cargo.lock")).expect("edge/Cargo.lock");
    assert!(!lock.contains("name = \"captchaai-engine\""), "edge/Cargo.lock still has the engine crate");
    let manifest = std::fs::read_to_string(root.join("edge/Cargo.toml")).expect("edge/Cargo.toml");
    assert!(!manifest.contains("captchaai-engine"), "edge/Cargo.toml still depends on the engine crate");
}
