#!/usr/bin/env bash
# CI for bindings/js: npm ci, build (jco transpile of the engine component), node:test, and an
# install of the packed tarball into an empty project. Needs target/component/captchaai_engine.wasm
# (`cargo xtask component`) and the emulator (`cargo build --release -p captchaai-emulator`, or
# CAPTCHAAI_EMULATOR=path).
set -euo pipefail
cd "$(dirname "$0")"
started=$SECONDS
step() { echo "== bindings/js: $* ($((SECONDS - started)) s)"; }

step "node $(node --version), npm $(npm --version)"
step "npm ci"
npm ci --no-audit --no-fund
step "build (jco transpile)"
npm run --silent build
step "test (node:test)"
npm test
step "fresh install of the packed tarball"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
npm pack --quiet --ignore-scripts --pack-destination "$scratch" >/dev/null
(
  cd "$scratch"
  npm init -y >/dev/null
  npm pkg set type=module
  npm install --no-audit --no-fund --silent ./captchaai-engine-*.tgz
  node --input-type=module -e "
    import { Solver, PermanentError } from 'captchaai-engine';
    const solver = new Solver('0123456789abcdef0123456789abcdef');
    const pending = solver.start({ type: 'turnstile', sitekey: '0x4AAAAAAABkMYinukE8nzY', pageurl: 'https://a.example.com/' });
    if (!pending.snapshot().includes('turnstile')) throw new Error('no snapshot');
    try { solver.start({ type: 'turnstile' }); throw new Error('accepted a bad task'); }
    catch (e) { if (!(e instanceof PermanentError) || e.code !== 'INVALID_TASK') throw e; }
    console.log('installed package: engine loads, validates and snapshots');
  "
)
step "done"
