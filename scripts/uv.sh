#!/usr/bin/env bash
# Prints the path of uv (https://docs.astral.sh/uv/), the installer the test scripts use for their
# venvs, installing the pinned version from PyPI into target/venv-uv the first time.
# Measured here (cold caches, 2 cores): the Mage integration's venv took 206 s with pip and 16 s
# with `uv pip install`, resolving the same versions; every venv CI builds adds up to minutes.
# The user-facing install checks (scripts/test-dist.sh, the docs check running the README's
# `pip install`) keep using pip, as users do.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UV_VERSION=0.13.9
uv="$ROOT/target/venv-uv/bin/uv"
if [ ! -x "$uv" ] || [ "$("$uv" --version 2>/dev/null | cut -d' ' -f2)" != "$UV_VERSION" ]; then
  echo "uv: installing uv==$UV_VERSION into target/venv-uv" >&2
  rm -rf "$ROOT/target/venv-uv"
  python3 -m venv "$ROOT/target/venv-uv"
  "$ROOT/target/venv-uv/bin/pip" install --quiet --disable-pip-version-check "uv==$UV_VERSION" >&2
fi
echo "$uv"
