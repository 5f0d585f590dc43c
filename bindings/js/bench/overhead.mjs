// Host overhead of the JS package per full canned solve: the type_recaptcha_v2 golden vector's
// replies fed straight back (no network, no sleeps), 7 engine calls (create, 1 poll-output,
// 5 handle-response). Measured for the jco build in gen/ (the package's, `npm run build`) and,
// when present, bench/alt/ (`node bench/build-alt.mjs`: jco 1.35.0 by default).
//
//   node bench/overhead.mjs [--rounds 7] [--solves 5000]
//
// Columns: "raw solve" calls the generated bindings directly; "per call in a solve" is that over
// its 7 calls; "package solve" goes through the package's EngineHost as Solver.run does (plus the
// trap-recovery snapshots: base and state at creation, state after each of the 4 in-flight
// results); "task-id call" is the smallest call on a live solve (the boundary's fixed cost).
// Medians over rounds, and the least round (what is left of a solve's cost when nothing else runs,
// the steadier figure on a busy machine). `npm run bench:alt` builds bench/alt/ (ALT_JCO=x.y.z for
// another version). Then the package's start-up in fresh processes: loading it (`require`) and
// its first engine instance (compiling the core modules), medians of STARTS runs.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { instantiateComponent } from '../src/engine.cjs';
import { EngineHost } from '../src/host.cjs';

const { values: args } = parseArgs({
  options: { rounds: { type: 'string', default: '7' }, solves: { type: 'string', default: '5000' } },
});
const ROUNDS = Number(args.rounds);
const SOLVES = Number(args.solves);

const vector = JSON.parse(readFileSync(new URL('../../../testdata/vectors/type_recaptcha_v2.json', import.meta.url), 'utf8'));
const taskJson = JSON.stringify(vector.task);
const replies = vector.script.map((entry) => entry.reply);

/** A fresh-instance function for a build: gen/ is the package's own; bench/alt/ is jco's ESM output. */
async function loadBuild(dir) {
  if (dir === '../gen') return instantiateComponent;
  const url = new URL(`${dir}/`, import.meta.url);
  const esm = new URL('captchaai_engine.js', url);
  if (!existsSync(esm)) return null;
  const generated = await import(esm.href);
  const modules = new Map();
  const core = (name) => {
    if (!modules.has(name)) modules.set(name, new WebAssembly.Module(readFileSync(new URL(name, url))));
    return modules.get(name);
  };
  return () => generated.instantiate(core, {});
}

function jcoVersion(dir) {
  return JSON.parse(readFileSync(new URL(`${dir}/source.json`, import.meta.url), 'utf8')).jco;
}

/** One canned solve on the raw bindings; returns the number of engine calls. */
function rawSolve(Solve) {
  let now = 0n;
  const solve = Solve.create(taskJson, vector.key, {}, now);
  let output = solve.pollOutput(now);
  let calls = 2;
  for (const reply of replies) {
    const request = output.val;
    if (request.at > now) now = request.at;
    now += BigInt(reply.after_ms);
    output = solve.handleResponse(now, request.id, { status: reply.status, body: reply.body });
    calls += 1;
  }
  if (output.tag !== 'solved') throw new Error(`the canned solve ended ${output.tag}`);
  solve[Symbol.dispose]();
  return calls;
}

/** One canned solve through the package's EngineHost with checkpoints, as Solver.run drives it. */
function packageSolve(host) {
  let now = 0n;
  const slot = host.create(taskJson, vector.key, {}, now);
  let output = host.pollOutput(slot, now);
  for (const reply of replies) {
    const request = output.val;
    if (request.at > now) now = request.at;
    now += BigInt(reply.after_ms);
    output = host.handleResponse(slot, now, request.id, { status: reply.status, body: reply.body });
    if (output.tag === 'send') host.checkpoint(slot);
  }
  if (output.tag !== 'solved') throw new Error(`the canned solve ended ${output.tag}`);
  host.drop(slot);
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** `{median, least}` µs per iteration of `fn` over ROUNDS rounds of `n` iterations. */
function measure(fn, n) {
  for (let i = 0; i < Math.min(n, 1000); i += 1) fn();
  const perRound = [];
  for (let r = 0; r < ROUNDS; r += 1) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < n; i += 1) fn();
    perRound.push(Number(process.hrtime.bigint() - started) / 1000 / n);
  }
  return { median: median(perRound), least: Math.min(...perRound) };
}

const STARTS = 7;

/** Start-up of the package in a fresh process: ms to load it and to make its first engine instance. */
function startup() {
  const script = `
    const t0 = performance.now();
    const { Solver } = require(${JSON.stringify(fileURLToPath(new URL('../src/index.cjs', import.meta.url)))});
    const t1 = performance.now();
    new Solver('0123456789abcdef0123456789abcdef');
    const t2 = performance.now();
    console.log(JSON.stringify([t1 - t0, t2 - t1]));`;
  const runs = [];
  for (let i = 0; i < STARTS; i += 1) {
    runs.push(JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })));
  }
  return { load: median(runs.map((r) => r[0])), instance: median(runs.map((r) => r[1])) };
}

const builds = [
  { dir: '../gen', label: 'gen/ (the package)' },
  { dir: 'alt', label: 'bench/alt/ (alternative)' },
];

const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : typeof Deno !== 'undefined' ? `deno ${Deno.version.deno}` : `node ${process.version}`;
console.log(`${runtime}; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}; ${ROUNDS} rounds x ${SOLVES} solves; medians`);
console.log(
  '| jco | build | raw solve (7 calls) µs | per call in a solve µs | package solve (+6 snapshot calls) µs | task-id call ns | least round: raw / package µs |',
);
console.log('|---|---|---|---|---|---|---|');
for (const build of builds) {
  const instantiate = await loadBuild(build.dir);
  if (!instantiate) {
    console.log(`| – | ${build.label} | not built (run \`node bench/build-alt.mjs\`) | | | | |`);
    continue;
  }
  const root = instantiate();
  const calls = rawSolve(root.engine.Solve);
  const raw = measure(() => rawSolve(root.engine.Solve), SOLVES);
  const host = new EngineHost(instantiate);
  const viaPackage = measure(() => packageSolve(host), SOLVES);
  const live = root.engine.Solve.create(taskJson, vector.key, {}, 0n);
  const taskIdNs = measure(() => live.taskId(), SOLVES * 20).median * 1000;
  console.log(
    `| ${jcoVersion(build.dir)} | ${build.label} | ${raw.median.toFixed(1)} | ${(raw.median / calls).toFixed(2)} | ` +
      `${viaPackage.median.toFixed(1)} | ${taskIdNs.toFixed(0)} | ${raw.least.toFixed(1)} / ${viaPackage.least.toFixed(1)} |`,
  );
}
if (typeof Bun !== 'undefined' || typeof Deno !== 'undefined') process.exit(0); // start-up: Node only
const start = startup();
console.log(`start-up (fresh processes, medians of ${STARTS}): load ${start.load.toFixed(1)} ms, first engine instance ${start.instance.toFixed(1)} ms`);
