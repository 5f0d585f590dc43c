// The behaviour suites (the typed layer, every golden vector, the fetch transport, end-to-end
// solves against the emulator) run again under Bun, Deno and a newer Node, each with its own test
// runner over the same node:test files: `bun test`, `deno test`, `node --test`. Same .wasm, same
// transcripts, in JavaScriptCore (Bun) and V8 (Deno, Node). A missing runtime skips with how to
// install it, and fails under CI=true (test/support/runtimes.mjs).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { locateRuntime, requireRuntime } from './support/runtimes.mjs';

const PACKAGE_ROOT = fileURLToPath(new URL('../', import.meta.url));
const SUITES = ['test/typed.test.mjs', 'test/vectors.test.mjs', 'test/transport.test.mjs', 'test/e2e.test.mjs'];

/** The environment without node:test's marker (a nested `node --test` would skip its files). */
function childEnv() {
  const env = { ...process.env, NO_COLOR: '1' };
  delete env.NODE_TEST_CONTEXT;
  delete env.FORCE_COLOR; // Deno colours whenever it is set
  return env;
}

/** Runs `bin args` in the package root; resolves with `{status, output}` (stdout and stderr). */
function run(bin, args, timeoutMs) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, {
      cwd: PACKAGE_ROOT,
      env: childEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, output });
    });
  });
}

const last = (text, n) => text.trimEnd().split('\n').slice(-n).join('\n');

const commands = {
  // Bun takes paths with ./ (a bare word is a name filter).
  bun: (files) => ['test', '--timeout', '120000', ...files.map((f) => `./${f}`)],
  // The permissions the suites need: their files and the vectors, loopback servers and the
  // emulator, its path from the environment.
  deno: (files) => ['test', '--no-lock', '--allow-read', '--allow-net=127.0.0.1', '--allow-run', '--allow-env', ...files],
  'node-lts': (files) => ['--test', '--test-reporter=tap', ...files],
};

/** How each runner says how many tests passed and failed. */
const summaries = {
  bun: (output) => {
    const pass = /^\s*(\d+) pass$/m.exec(output);
    const fail = /^\s*(\d+) fail$/m.exec(output);
    return pass && fail ? { pass: Number(pass[1]), fail: Number(fail[1]) } : null;
  },
  deno: (output) => {
    const m = /^(?:ok|FAILED) \| (\d+) passed(?: \(\d+ steps?\))? \| (\d+) failed/m.exec(output);
    return m ? { pass: Number(m[1]), fail: Number(m[2]) } : null;
  },
  'node-lts': (output) => {
    const pass = /^# pass (\d+)$/m.exec(output);
    const fail = /^# fail (\d+)$/m.exec(output);
    return pass && fail ? { pass: Number(pass[1]), fail: Number(fail[1]) } : null;
  },
};

for (const name of ['bun', 'deno', 'node-lts']) {
  const runtime = locateRuntime(name);
  test(`${name}: the typed, vector, transport and end-to-end suites`, { skip: runtime.skip, timeout: 600_000 }, async (t) => {
    const bin = requireRuntime(runtime);
    t.diagnostic(`${runtime.version} (${bin})`);
    const { status, signal, output: raw } = await run(bin, commands[name](SUITES), 540_000);
    const output = raw.replace(/\x1b\[[0-9;]*m/g, '');
    const summary = summaries[name](output);
    assert.ok(status === 0 && summary && summary.fail === 0, `${name} ${SUITES.join(' ')} ended ${status ?? signal}:\n${last(output, 80)}`);
    // Every test ran: as many as node:test finds in these files here (the vectors: one each).
    assert.ok(summary.pass >= 100, `only ${summary.pass} tests ran under ${name}:\n${last(output, 40)}`);
    t.diagnostic(`${name}: ${summary.pass} passed, ${summary.fail} failed`);
  });
}
