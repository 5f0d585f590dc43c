#!/usr/bin/env bash
# Conformance: the official CaptchaAI Python SDK (PyPI captchaai==1.0.1, unmodified) solves every
# type it supports against the emulator ($CAPTCHAAI_EMULATOR, else its release build; default mode and silent-queue
# mode) and meets the emulator's account answers with the exceptions its source promises.
# Makes its venv under target/conformance-venv. Exits non-zero on any failure.
# Usage: tests/conformance/run.sh   (from anywhere; about 30 s after the emulator's release build)
set -euo pipefail
cd "$(dirname "$0")/../.."
emulator=$(bash scripts/emulator.sh)
venv=target/conformance-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$(bash scripts/uv.sh)" pip install --quiet --python "$venv/bin/python" captchaai==1.0.1
exec "$venv/bin/python" tests/conformance/sdk_conformance.py --emulator "$emulator"
