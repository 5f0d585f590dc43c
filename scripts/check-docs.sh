#!/usr/bin/env bash
# Runs every quick start in README.md, docs/*.md and the packages' READMEs (bindings/*/README.md)
# against the CaptchaAI emulator and fails, naming the block by file and line, if one breaks. The
# rules (which blocks run, how) are in scripts/check-docs.py and docs/testing.md ("The docs check").
#
#   scripts/check-docs.sh            # every block of README.md, docs/*.md and bindings/*/README.md
#   scripts/check-docs.sh --list     # what would run, and what is unchecked and why
#   scripts/check-docs.sh FILE...    # only these Markdown files (paths in blocks stay relative
#                                    # to the repository root)
#
# Needs: the emulator ($CAPTCHAAI_EMULATOR, else target/release/captchaai-emulator: `cargo build
# --release -p captchaai-emulator`), python3 with venv, node 20+ and npm, curl, and network access
# for pip and npm (the README's install blocks run). The check builds the workspace's binaries and
# examples (dev profile) itself; scripts/run.sh builds the rest when the edge block runs.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/check-docs.py "$@"
