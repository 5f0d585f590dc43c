#!/usr/bin/env bash
# Polling-schedule benchmark (issues 10 and 22): polls per solve and answer-to-client delay per
# captcha type and solve-time mix (benches/polling/mixes.json unless --mixes) for this engine
# (fixed tables, and adaptive; native engine, virtual clock), the official captchaai 1.0.1 SDK's
# defaults and 2captcha-python 2.1.2's (each driven through its own code on a virtual clock);
# then mix shifts, issue 22's goal checks and the engine-cost numbers. Makes its venv under
# target/polling-venv. Prints Markdown.
# Usage: benches/polling/run.sh [--mixes FILE] [--solves N] [--warmup N] [--seed S]   (about a minute)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet --manifest-path benches/polling/Cargo.toml --target-dir target/polling
venv=target/polling-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check captchaai==1.0.1 2captcha-python==2.1.2
exec "$venv/bin/python" benches/polling/polling.py --engine target/polling/release/polling-bench "$@"
