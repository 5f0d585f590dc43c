//! Files generated from the engine and committed: written when stale, or (`--check`) an error.

use std::path::{Path, PathBuf};
use std::{env, fs};

use anyhow::{Context, Result, bail};

/// Writes `generated` to `relative` (from the workspace root) unless it is already there; with
/// `--check` (the command's first option) fails instead when the committed file differs.
/// `command` is the xtask subcommand, `what` names the file's content in the message.
pub fn write_or_check(relative: &str, generated: &str, command: &str, what: &str) -> Result<()> {
    let path = path(relative)?;
    let committed = fs::read_to_string(&path).unwrap_or_default();
    match env::args().nth(2).as_deref() {
        None if generated == committed => println!("{}: up to date", path.display()),
        None => {
            fs::write(&path, generated).with_context(|| format!("writing {}", path.display()))?;
            println!("{}: {what} written", path.display());
        }
        Some("--check") if generated == committed => println!("{}: up to date", path.display()),
        Some("--check") => bail!("{} is stale: run `cargo xtask {command}`", path.display()),
        Some(other) => bail!("unknown option {other}; usage: cargo xtask {command} [--check]"),
    }
    Ok(())
}

/// `relative` from the workspace root.
pub fn path(relative: &str) -> Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("workspace root")?;
    Ok(root.join(relative))
}
