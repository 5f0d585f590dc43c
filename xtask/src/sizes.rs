//! `cargo xtask sizes [--check | --write]`: the BENCHMARKS.md rows that state the build's sizes
//! (the engine component, the composed edge app), made from the files `cargo xtask component`
//! and `cargo xtask edge` wrote, so the table cannot drift from the build. Without a flag it
//! prints the rows; `--write` puts them into BENCHMARKS.md; `--check` fails when a size there is
//! more than [`TOLERANCE`] off the build (scripts/test.sh runs it after building).

use std::path::{Path, PathBuf};
use std::{env, fs};

use anyhow::{Context, Result, bail};

/// How far a size in BENCHMARKS.md may be from the build before `--check` fails: small edits to
/// the engine do not each need a new row, a release's worth of them do.
const TOLERANCE: f64 = 0.02;

/// One size row: its first cell (how `--check` and `--write` find it), the file it measures, and
/// the rest of the row around the size.
struct SizeRow {
    figure: &'static str,
    goal: &'static str,
    file: &'static str,
    after: &'static str,
    reproduce: &'static str,
}

const ROWS: &[SizeRow] = &[
    SizeRow {
        figure: "engine component size",
        goal: "≤ 512 KiB, no imports",
        file: "component/captchaai_engine.wasm",
        after: ", no imports",
        reproduce: "`cargo xtask component && cargo xtask sizes`",
    },
    SizeRow {
        figure: "the composed edge app (edge + engine component)",
        goal: "(reference)",
        file: "edge/captchaai_edge.wasm",
        after: "",
        reproduce: "`cargo xtask edge && cargo xtask sizes`",
    },
];

pub fn sizes(args: &[String]) -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("workspace root")?.to_path_buf();
    let target = env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let benchmarks = root.join("BENCHMARKS.md");
    let mut measured = Vec::new();
    for row in ROWS {
        let path = target.join(row.file);
        let bytes = fs::metadata(&path)
            .with_context(|| format!("{} (build it first: cargo xtask component && cargo xtask edge)", path.display()))?
            .len();
        measured.push((row, bytes));
    }
    match args.first().map(String::as_str) {
        None => {
            for (row, bytes) in &measured {
                println!("{}", render(row, *bytes));
            }
            Ok(())
        }
        Some("--write") => {
            let mut text = fs::read_to_string(&benchmarks)?;
            for (row, bytes) in &measured {
                let (start, end) = find_row(&text, row.figure)?;
                text.replace_range(start..end, &render(row, *bytes));
            }
            fs::write(&benchmarks, text)?;
            println!("sizes: BENCHMARKS.md's size rows now match the build");
            Ok(())
        }
        Some("--check") => {
            let text = fs::read_to_string(&benchmarks)?;
            let mut stale = Vec::new();
            for (row, bytes) in &measured {
                let (start, end) = find_row(&text, row.figure)?;
                let stated = stated_bytes(&text[start..end])
                    .with_context(|| format!("BENCHMARKS.md's row {:?} states no **N bytes**", row.figure))?;
                let off = (stated as f64 - *bytes as f64).abs() / *bytes as f64;
                if off > TOLERANCE {
                    stale.push(format!("{}: BENCHMARKS.md says {stated} bytes, the build is {bytes}", row.figure));
                }
            }
            if !stale.is_empty() {
                bail!(
                    "sizes in BENCHMARKS.md are more than {}% off the build; run `cargo xtask sizes --write`:\n  {}",
                    TOLERANCE * 100.0,
                    stale.join("\n  ")
                );
            }
            println!("sizes: BENCHMARKS.md's size rows are within {}% of the build", TOLERANCE * 100.0);
            Ok(())
        }
        Some(other) => bail!("usage: cargo xtask sizes [--check | --write] (got {other:?})"),
    }
}

fn render(row: &SizeRow, bytes: u64) -> String {
    format!(
        "| {} | {} | **{} bytes** ({:.1} KiB){} | {} | any |",
        row.figure,
        row.goal,
        thousands(bytes),
        bytes as f64 / 1024.0,
        row.after,
        row.reproduce
    )
}

/// The byte range of the table row whose first cell is `figure` (without its newline).
fn find_row(text: &str, figure: &str) -> Result<(usize, usize)> {
    let prefix = format!("| {figure} |");
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with(&prefix) {
            return Ok((offset, offset + line.trim_end_matches('\n').len()));
        }
        offset += line.len();
    }
    bail!("BENCHMARKS.md has no row starting {prefix:?}: add one (`cargo xtask sizes` prints it)")
}

/// The first `**N bytes**` of a row (`N` with or without thousands separators).
fn stated_bytes(row: &str) -> Option<u64> {
    let rest = &row[row.find("**")? + 2..];
    rest[..rest.find(" bytes**")?].replace(',', "").parse().ok()
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip() {
        let row = render(&ROWS[0], 399_825);
        assert_eq!(
            row,
            "| engine component size | ≤ 512 KiB, no imports | **399,825 bytes** (390.5 KiB), no imports | `cargo xtask component && cargo xtask sizes` | any |"
        );
        assert_eq!(stated_bytes(&row), Some(399_825));
        let text = format!("# B\n\n{row}\n| other | x |\n");
        let (start, end) = find_row(&text, ROWS[0].figure).unwrap();
        assert_eq!(&text[start..end], row);
        assert!(find_row(&text, "missing").is_err());
        assert_eq!(thousands(973_207), "973,207");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
    }
}
