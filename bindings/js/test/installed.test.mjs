// The package as users get it: `npm pack`, installed into an empty project in a temporary
// directory outside the repository, then used from there with `import` and with `require` under
// Node (this one and a newer release), Bun and Deno (Deno with no permission but loopback
// network), each solving against the emulator (test/installed/checks.cjs); and its declarations
// type-checked from an ES module and a CommonJS file. A missing runtime skips with how to install
// it, and fails under CI=true (test/support/runtimes.mjs).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startEmulator } from './support/emulator.mjs';
import { locateRuntime, requireRuntime } from './support/runtimes.mjs';

const PACKAGE_ROOT = fileURLToPath(new URL('../', import.meta.url));
const VECTORS = fileURLToPath(new URL('../../../testdata/vectors/', import.meta.url));
const TIME_SCALE = 20;
const THREADS = 2;
const UNSOLVABLE_SITEKEY = '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_XXX';
const UNKNOWN_KEY = `inst0key${'9'.repeat(24)}`;

const RUNS = [];
for (const runtime of ['node', 'node-lts', 'bun', 'deno']) {
  for (const entry of ['import', 'require']) RUNS.push({ runtime, entry, key: `inst0key${String(RUNS.length).padStart(24, '0')}` });
}

/** The Node running the tests, or another runtime from test/support/runtimes.mjs. */
function runtimeFor(name) {
  if (name === 'node') return { name, bin: process.execPath, version: process.version, skip: false };
  return locateRuntime(name);
}

/** The command that runs `script` with `args` under a runtime. */
function command(name, script, args) {
  // Deno: only the network to the emulator; reading the package needs no permission.
  if (name === 'deno') return ['run', '--no-lock', '--allow-net=127.0.0.1', script, ...args];
  return [script, ...args];
}

let scratch;
let project;
let tarball;
let emulator;
let closedUrl;

function npm(args, cwd) {
  return execFileSync('npm', args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_loglevel: 'error' } });
}

async function closedPortUrl() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'captchaai-engine-installed-'));
  // gen/ is built already (`npm run build`); pack without running it again.
  const [packed] = JSON.parse(npm(['pack', '--json', '--ignore-scripts', '--pack-destination', scratch], PACKAGE_ROOT));
  tarball = packed;
  project = join(scratch, 'project');
  cpSync(join(PACKAGE_ROOT, 'test', 'installed'), project, { recursive: true });
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'installed-check', version: '0.0.0', private: true }, null, 2));
  npm(['install', '--no-audit', '--no-fund', '--ignore-scripts', join(scratch, packed.filename)], project);
  emulator = await startEmulator([
    ...RUNS.flatMap((run) => ['--key', `${run.key}:${THREADS}`]),
    '--time-scale', String(TIME_SCALE),
    '--solve-time', 'all=6000:9000',
    '--unsolvable-sitekey', UNSOLVABLE_SITEKEY,
    '--ban-after-bad-keys', '0',
  ]);
  closedUrl = await closedPortUrl();
});

after(async () => {
  await emulator?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

test('the tarball holds the entry points, their declarations and the engine, and nothing else', () => {
  const files = tarball.files.map((f) => f.path).sort();
  for (const needed of [
    'package.json',
    'README.md',
    'src/index.cjs',
    'src/index.mjs',
    'src/index.d.ts',
    'src/tasks.d.ts',
    'gen/index.d.cts',
    'gen/tasks.d.cts',
    'gen/captchaai_engine.cjs',
    'gen/captchaai_engine.wasm.cjs',
    'gen/source.json',
  ]) {
    assert.ok(files.includes(needed), `${needed} is in the tarball: ${files.join(', ')}`);
  }
  for (const path of files) {
    assert.match(path, /^(package\.json|README\.md|src\/[\w.]+\.(cjs|mjs|d\.ts)|gen\/[\w.]+\.(cjs|d\.cts|json))$/, `unexpected ${path}`);
  }
  const manifest = JSON.parse(readFileSync(join(project, 'node_modules', 'captchaai-engine', 'package.json'), 'utf8'));
  assert.equal(manifest.private, undefined, 'publishable');
  assert.deepEqual(manifest.dependencies ?? {}, {}, 'no runtime dependencies');
});

for (const run of RUNS) {
  const runtime = runtimeFor(run.runtime);
  test(`${run.runtime}, ${run.entry}: the installed package solves against the emulator`, { skip: runtime.skip, timeout: 180_000 }, async (t) => {
    const bin = requireRuntime(runtime);
    t.diagnostic(`${runtime.version} (${bin})`);
    const options = {
      url: emulator.url,
      key: run.key,
      unknownKey: UNKNOWN_KEY,
      threads: THREADS,
      timeScale: TIME_SCALE,
      unsolvableSitekey: UNSOLVABLE_SITEKEY,
      closedUrl,
      image: JSON.parse(readFileSync(join(VECTORS, 'type_image_multipart.json'), 'utf8')).task.image,
    };
    const script = run.entry === 'import' ? 'check.mjs' : 'check.cjs';
    const { status, output } = await spawnCollect(bin, command(run.runtime, script, [JSON.stringify(options)]), project, 150_000);
    assert.equal(status, 0, `${run.runtime} ${script} failed:\n${output}`);
    assert.match(output, /installed package OK: .*, (\d+) checks/, output);
    assert.ok(!output.includes(run.key) && !output.includes(UNKNOWN_KEY), 'no key in the output');
    t.diagnostic(output.trimEnd().split('\n').at(-1));
  });
}

test('TypeScript: the installed declarations for an ES module and a CommonJS file', () => {
  const consumer = join(project, 'ts');
  cpSync(join(PACKAGE_ROOT, 'test', 'types'), consumer, { recursive: true });
  // usage.ts is an ES module, usage.cts CommonJS, as in the repository.
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  // node_modules is the project's: the declarations come from the tarball.
  const tsc = join(PACKAGE_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const result = spawnSyncText(process.execPath, [tsc, '-p', join(consumer, 'tsconfig.json'), '--traceResolution'], consumer);
  assert.equal(result.status, 0, `tsc failed:\n${result.output.split('\n').filter((l) => !l.startsWith('=') && !/^(File|Found|Loading|Resolving|Directory|Module|Explicitly|Skipping|Using|Exiting|'package|Resolution|======)/.test(l)).join('\n')}`);
  const resolved = [...result.output.matchAll(/Module name 'captchaai-engine' was successfully resolved to '([^']+)'/g)].map((m) => m[1]);
  assert.ok(resolved.some((p) => p.endsWith('node_modules/captchaai-engine/src/index.d.ts')), `import: ${resolved}`);
  assert.ok(resolved.some((p) => p.endsWith('node_modules/captchaai-engine/gen/index.d.cts')), `require: ${resolved}`);
  assert.ok(resolved.every((p) => p.startsWith(project)), `from the installed package only: ${resolved}`);
  assert.ok(readdirSync(consumer).includes('usage.cts'));
});

function spawnSyncText(bin, args, cwd) {
  try {
    return { status: 0, output: execFileSync(bin, args, { cwd, encoding: 'utf8', maxBuffer: 64 << 20 }) };
  } catch (error) {
    return { status: error.status ?? 1, output: `${error.stdout ?? ''}${error.stderr ?? ''}` };
  }
}

/** Runs `bin args` in `cwd`; resolves with `{status, output}` (stdout and stderr, no colours). */
function spawnCollect(bin, args, cwd, timeoutMs) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, NO_COLOR: '1' };
    delete env.FORCE_COLOR;
    delete env.NODE_TEST_CONTEXT;
    const child = spawn(bin, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status: status ?? signal, output: output.replace(/\x1b\[[0-9;]*m/g, '') });
    });
  });
}
