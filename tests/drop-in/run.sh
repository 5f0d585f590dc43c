#!/usr/bin/env bash
# Drop-in: the edge's /in.php and /res.php (docs/drop-in.md) with the REAL clients, unmodified but
# for base URL and key: the official CaptchaAI SDK (PyPI captchaai==1.0.1) and 2captcha-python
# 2.1.2 (which always speaks HTTPS: the edge gets a self-signed certificate, REQUESTS_CA_BUNDLE /
# SSL_CERT_FILE point at it), plus curl, against the emulator. Under real Spin (its --tls-cert)
# and under captchaai-serve behind nginx (TLS); the load part runs three client processes over
# two real Spin instances on one real redis-server. See drop_in.py for what each part checks.
#
# Needs: Spin ($SPIN_BIN, else ../shared/tools/spin/spin), nginx, redis-server, openssl, curl;
# the seeds part needs ../shared/seeds and the Airflow, Dagster and Mage venvs that
# bindings/python/integrations.sh makes (target/venv-airflow, -dagster, -mage).
# Where one is missing the parts needing it are SKIPPED, saying so; under CI=true they FAIL.
# The emulator is $CAPTCHAAI_EMULATOR (else its release build); the serve host is
# $CAPTCHAAI_SERVE, else target/debug/captchaai-serve (built when missing).
# Usage: tests/drop-in/run.sh [--parts types,hostile,load,seeds]   (from anywhere; about 5
# minutes after the builds)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

cargo xtask component >/dev/null
cargo xtask edge >/dev/null
emulator=$(bash scripts/emulator.sh)
serve=${CAPTCHAAI_SERVE:-$ROOT/target/debug/captchaai-serve}
if [[ ! -x $serve ]]; then
  cargo build --quiet -p captchaai-serve
fi
spin=${SPIN_BIN:-$ROOT/../shared/tools/spin/spin}

venv=target/dropin-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$(bash scripts/uv.sh)" pip install --quiet --python "$venv/bin/python" captchaai==1.0.1 2captcha-python==2.1.2
exec "$venv/bin/python" tests/drop-in/drop_in.py --emulator "$emulator" --serve "$serve" --spin "$spin" "$@"
