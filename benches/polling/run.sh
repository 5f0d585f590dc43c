#!/usr/bin/env bash
# Polling-schedule benchmark (issues 10, 22 and 35): polls per solve, answer-to-client delay and
# their cost at several prices of a poll, per captcha type and solve-time mix (the shipped
# benches/polling/mixes.json and mixes generated from a seed), for this engine (fixed tables,
# and adaptive; native engine, virtual clock), the official captchaai 1.0.1 SDK's defaults,
# 2captcha-python 2.1.2's (each driven through its own code on a virtual clock) and the best
# schedule of adaptive polling's family in hindsight; then mix shifts, issue 35's goal checks
# and the engine-cost numbers. Exits 1 when a goal check fails (with --gate FILE: when a check
# fails the bound FILE gives it; scripts/test.sh's short run). Makes its venv under
# target/polling-venv. Prints Markdown.
# Usage: benches/polling/run.sh [--mixes FILE] [--generated N] [--gen-seed S] [--seed S]
#        [--solves N] [--warmup N] [--shift BEFORE AFTER] [--costs C,..] [--gate FILE]
#        (polling.py --help)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet --manifest-path benches/polling/Cargo.toml --target-dir target/polling
venv=target/polling-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check captchaai==1.0.1 2captcha-python==2.1.2
exec "$venv/bin/python" benches/polling/polling.py --engine target/polling/release/polling-bench "$@"
