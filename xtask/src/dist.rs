//! `cargo xtask dist [python|npm|edge|cli ...]`: builds what users install into `dist/`
//! (gitignored), from the engine component `cargo xtask component` builds first:
//!
//! - `python`: the wheel and sdist of `bindings/python` (`python -m build --no-isolation`, with
//!   build and hatchling in `target/venv-dist`, made once): `dist/captchaai_engine-*.whl`,
//!   `dist/captchaai_engine-*.tar.gz`;
//! - `npm`: the tarball of `bindings/js` (`npm ci` if its tools are missing, `npm run build`
//!   (jco transpile), `npm pack`): `dist/captchaai-engine-*.tgz`;
//! - `edge`: the edge bundle `dist/edge/`: the composed `captchaai_edge.wasm` (`cargo xtask edge`)
//!   and a `spin.toml` derived from the repository's (see [`bundle_manifest`]) whose `source`
//!   is that file beside it, so `spin up` runs it from the folder;
//! - `cli`: the `captchaai` binary (`cargo build --release -p captchaai`): `dist/captchaai`.
//!   `--cli-profile dev` takes the dev build instead (`target/debug/captchaai`, which the
//!   workspace's tests build anyway): the same source, for checks that cannot spend the release
//!   build of wasmtime (about 8 minutes on 2 cores).
//!
//! Default: all four. Each step reuses what is built (cargo and the venv are incremental; the
//! component keeps its mtime when unchanged, so the CLI is not rebuilt for nothing). Old
//! versions of an artifact are removed before it is built. `scripts/test-dist.sh` installs each
//! one outside the repository and solves a task with it against the emulator.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use std::{env, fs};

use anyhow::{Context, Result, bail};

/// The build tools in `target/venv-dist` (a new list makes a new venv).
const PYTHON_BUILD_TOOLS: &[&str] = &["build==1.6.1", "hatchling==1.33.0"];

/// The repository's manifest serves the composed app from here; the bundle from beside it.
const ROOT_SOURCE: &str = r#"source = "target/edge/captchaai_edge.wasm""#;
const BUNDLE_SOURCE: &str = r#"source = "captchaai_edge.wasm""#;

const ARTIFACTS: &[&str] = &["python", "npm", "edge", "cli"];

pub fn dist(args: &[String]) -> Result<()> {
    let mut selected: Vec<&str> = Vec::new();
    let mut cli_profile = CliProfile::Release;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--cli-profile" {
            cli_profile = match args.next().map(String::as_str) {
                Some("release") => CliProfile::Release,
                Some("dev") => CliProfile::Dev,
                other => bail!("cargo xtask dist: --cli-profile takes release or dev, not {other:?}"),
            };
            continue;
        }
        let Some(name) = ARTIFACTS.iter().find(|a| **a == arg) else {
            bail!("cargo xtask dist: unknown artifact {arg:?} (choose from {})", ARTIFACTS.join(", "));
        };
        if !selected.contains(name) {
            selected.push(name);
        }
    }
    if selected.is_empty() {
        selected = ARTIFACTS.to_vec();
    }

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("workspace root")?.to_path_buf();
    let target = env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let target = std::path::absolute(&target).unwrap_or(target);
    let out = root.join("dist");
    fs::create_dir_all(&out)?;
    let progress = Progress(Instant::now());

    progress.say("engine component (cargo xtask component)");
    crate::component()?;
    let engine = target.join("component/captchaai_engine.wasm");

    let mut built: Vec<PathBuf> = Vec::new();
    for artifact in &selected {
        match *artifact {
            "python" => {
                progress.say("Python wheel and sdist (bindings/python, python -m build)");
                built.extend(python(&root, &target, &out, &engine, &progress)?);
            }
            "npm" => {
                progress.say("npm tarball (bindings/js: jco transpile, npm pack)");
                built.push(npm(&root, &out, &engine)?);
            }
            "edge" => {
                progress.say("edge bundle (cargo xtask edge; dist/edge/ with its spin.toml)");
                built.extend(edge_bundle(&root, &target, &out)?);
            }
            "cli" => {
                progress.say(&format!("captchaai CLI ({})", cli_profile.command()));
                built.push(cli(&root, &target, &out, cli_profile)?);
            }
            _ => unreachable!("checked above"),
        }
    }

    progress.say(&format!("done: {} file(s) in {}", built.len(), out.display()));
    for path in &built {
        let size = fs::metadata(path)?.len();
        println!("  {:<48} {:>10.1} KiB", path.strip_prefix(&root).unwrap_or(path).display(), size as f64 / 1024.0);
    }
    Ok(())
}

/// Prints each step with the seconds since `cargo xtask dist` started.
struct Progress(Instant);

impl Progress {
    fn say(&self, what: &str) {
        println!("== dist [{:6.1} s] {what}", self.0.elapsed().as_secs_f64());
    }
}

fn run(command: &mut Command, what: &str) -> Result<()> {
    let status = command.status().with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// Removes the files in `dir` whose names start with `prefix` and end with one of `suffixes`.
fn remove_old(dir: &Path, prefix: &str, suffixes: &[&str]) -> Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) && suffixes.iter().any(|s| name.ends_with(s)) {
            fs::remove_file(entry.path()).with_context(|| format!("removing {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// The one file in `dir` named `prefix*suffix`.
fn the_file(dir: &Path, prefix: &str, suffix: &str) -> Result<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) && name.ends_with(suffix) {
            found.push(dir.join(name));
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        n => bail!("expected one {prefix}*{suffix} in {}, found {n}", dir.display()),
    }
}

fn python(root: &Path, target: &Path, out: &Path, engine: &Path, progress: &Progress) -> Result<Vec<PathBuf>> {
    let venv = target.join("venv-dist");
    let python = venv.join("bin/python");
    let stamp_path = venv.join(".dist-stamp");
    let stamp = PYTHON_BUILD_TOOLS.join(" ");
    if fs::read_to_string(&stamp_path).ok().as_deref() != Some(stamp.as_str()) || !python.exists() {
        progress.say(&format!("creating {} with {stamp}", venv.display()));
        if venv.exists() {
            fs::remove_dir_all(&venv)?;
        }
        let interpreter = env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        run(Command::new(&interpreter).arg("-m").arg("venv").arg(&venv), &format!("{interpreter} -m venv"))?;
        run(
            Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--only-binary", ":all:"])
                .args(PYTHON_BUILD_TOOLS),
            "pip install (the Python build tools)",
        )?;
        fs::write(&stamp_path, &stamp)?;
    }
    remove_old(out, "captchaai_engine-", &[".whl", ".tar.gz"])?;
    // The sdist first, then the wheel from the unpacked sdist (build's default): the wheel is
    // built as a user building from the sdist would build it.
    run(
        Command::new(&python)
            .args(["-m", "build", "--no-isolation", "--outdir"])
            .arg(out)
            .arg(root.join("bindings/python"))
            .env("CAPTCHAAI_ENGINE_WASM", engine),
        "python -m build (bindings/python)",
    )?;
    Ok(vec![the_file(out, "captchaai_engine-", ".whl")?, the_file(out, "captchaai_engine-", ".tar.gz")?])
}

fn npm(root: &Path, out: &Path, engine: &Path) -> Result<PathBuf> {
    let js = root.join("bindings/js");
    if !js.join("node_modules/@bytecodealliance/jco/package.json").exists() {
        run(Command::new("npm").current_dir(&js).args(["ci", "--no-audit", "--no-fund"]), "npm ci (bindings/js)")?;
    }
    run(
        Command::new("npm").current_dir(&js).args(["run", "--silent", "build"]).env("CAPTCHAAI_ENGINE_WASM", engine),
        "npm run build (bindings/js)",
    )?;
    remove_old(out, "captchaai-engine-", &[".tgz"])?;
    // --ignore-scripts: prepack would run the build just done again.
    let packed = Command::new("npm")
        .current_dir(&js)
        .args(["pack", "--json", "--ignore-scripts", "--pack-destination"])
        .arg(out)
        .env("npm_config_loglevel", "error")
        .output()
        .context("running npm pack")?;
    if !packed.status.success() {
        bail!("npm pack failed: {}", String::from_utf8_lossy(&packed.stderr));
    }
    let listing: serde_json::Value = serde_json::from_slice(&packed.stdout).context("reading npm pack --json")?;
    let filename = listing[0]["filename"].as_str().context("npm pack --json names no file")?;
    let tarball = out.join(filename);
    if !tarball.is_file() {
        bail!("npm pack reported {filename}, which is not in {}", out.display());
    }
    Ok(tarball)
}

fn edge_bundle(root: &Path, target: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    crate::edge::edge()?;
    let bundle = out.join("edge");
    if bundle.exists() {
        fs::remove_dir_all(&bundle)?;
    }
    fs::create_dir_all(&bundle)?;
    let wasm = bundle.join("captchaai_edge.wasm");
    fs::copy(target.join("edge/captchaai_edge.wasm"), &wasm).context("copying the composed edge app")?;
    let manifest = fs::read_to_string(root.join("spin.toml")).context("reading spin.toml")?;
    let toml = bundle.join("spin.toml");
    fs::write(&toml, bundle_manifest(&manifest)?)?;
    Ok(vec![toml, wasm])
}

/// The bundle's spin.toml from the repository's: the same application, variables, trigger and
/// component, with the component's `source` pointing beside the manifest, without the
/// `[component.*.build]` table (it runs `cargo xtask`, which only the repository has), and with a
/// header saying so in place of the repository's opening comments. Fails if the repository's
/// manifest no longer has the one `source` line or the one build table it expects.
fn bundle_manifest(manifest: &str) -> Result<String> {
    if manifest.matches(ROOT_SOURCE).count() != 1 {
        bail!("spin.toml should have exactly one `{ROOT_SOURCE}` line; update xtask/src/dist.rs");
    }
    let mut lines: Vec<&str> = manifest.lines().skip_while(|l| l.starts_with('#') || l.trim().is_empty()).collect();
    let is_build_table = |l: &str| l.starts_with("[component.") && l.trim_end().ends_with(".build]");
    let Some(start) = lines.iter().position(|l| is_build_table(l)) else {
        bail!("spin.toml has no [component.*.build] table; update xtask/src/dist.rs");
    };
    let end = lines[start + 1..].iter().position(|l| l.starts_with('[')).map_or(lines.len(), |i| start + 1 + i);
    lines.drain(start..end);
    if lines.iter().any(|l| is_build_table(l)) {
        bail!("spin.toml has more than one [component.*.build] table; update xtask/src/dist.rs");
    }
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let mut text = String::from(
        "# The CaptchaAI edge gateway as a Spin 4.1+ application: written by `cargo xtask dist` from the\n\
         # repository's spin.toml (edit that one). `captchaai_edge.wasm` beside this file is the edge app\n\
         # composed with the captchaai-engine component; it imports only WASI and spin:*. From this folder:\n\
         #   SPIN_VARIABLE_CAPTCHAAI_KEY=... SPIN_VARIABLE_CLIENT_TOKENS=... spin up\n",
    );
    for line in lines {
        text.push_str(&line.replace(ROOT_SOURCE, BUNDLE_SOURCE));
        text.push('\n');
    }
    Ok(text)
}

/// Which cargo profile `dist/captchaai` is built with.
#[derive(Clone, Copy)]
enum CliProfile {
    Release,
    Dev,
}

impl CliProfile {
    fn command(self) -> &'static str {
        match self {
            CliProfile::Release => "cargo build --release -p captchaai",
            CliProfile::Dev => "cargo build --workspace --bins --examples",
        }
    }

    /// Dev builds the workspace as the tests and the docs check do: with the same features
    /// unified, the binary is the one they built (`-p captchaai` alone would unify fewer features
    /// and build wasmtime again).
    fn build_args(self) -> &'static [&'static str] {
        match self {
            CliProfile::Release => &["--release", "-p", "captchaai", "--bin", "captchaai"],
            CliProfile::Dev => &["--workspace", "--bins", "--examples"],
        }
    }

    /// The folder under the target directory cargo writes this profile's binaries to.
    fn dir(self) -> &'static str {
        match self {
            CliProfile::Release => "release",
            CliProfile::Dev => "debug",
        }
    }
}

fn cli(root: &Path, target: &Path, out: &Path, profile: CliProfile) -> Result<PathBuf> {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build.current_dir(root).arg("build").arg("--quiet").args(profile.build_args());
    // Without the variables `cargo run` set for xtask itself: ring's build script reruns when
    // CARGO_MANIFEST_DIR changes, so inheriting xtask's would rebuild ring, rustls and the CLI
    // (minutes) every time the CLI is built alternately from here and from a shell.
    for (name, _) in env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&name.as_ref())
        {
            build.env_remove(name.as_ref());
        }
    }
    run(&mut build, profile.command())?;
    let binary = out.join("captchaai");
    // Copied, not linked: a later build must not change what dist/ holds.
    let built = target.join(profile.dir()).join("captchaai");
    fs::copy(&built, &binary).with_context(|| format!("copying {}", built.display()))?;
    Ok(binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPOSITORY_MANIFEST: &str = include_str!("../../spin.toml");

    #[test]
    fn the_bundle_manifest_is_the_repositorys_with_the_source_beside_it_and_no_build() {
        let bundle = bundle_manifest(REPOSITORY_MANIFEST).unwrap();
        assert!(bundle.contains(&format!("\n{BUNDLE_SOURCE}\n")), "{bundle}");
        assert!(!bundle.contains("target/"), "no path into the repository's target/:\n{bundle}");
        assert!(!bundle.contains(".build]") && !bundle.contains("cargo xtask component &&"), "{bundle}");
        // Every other setting line is the repository's, in order.
        let settings = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .map(|l| l.replace(ROOT_SOURCE, BUNDLE_SOURCE))
                .collect()
        };
        let repository: Vec<String> = settings(REPOSITORY_MANIFEST)
            .into_iter()
            .take_while(|l| !(l.starts_with("[component.") && l.ends_with(".build]")))
            .collect();
        assert_eq!(settings(&bundle), repository);
        assert!(
            bundle.contains("[component.captchaai-edge.variables]")
                && bundle.contains("key_value_stores = [\"default\"]")
        );
    }

    #[test]
    fn a_changed_repository_manifest_is_refused_rather_than_bundled_wrong() {
        assert!(bundle_manifest(&REPOSITORY_MANIFEST.replace(ROOT_SOURCE, r#"source = "elsewhere.wasm""#)).is_err());
        let without_build = REPOSITORY_MANIFEST.split("[component.captchaai-edge.build]").next().unwrap();
        assert!(bundle_manifest(without_build).is_err());
    }
}
