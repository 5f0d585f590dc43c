// The typed layer without a network: engine failures become the right error class, bad input is
// a clear typed error, the key never shows, and a trapped instance is replaced transparently.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { inspect } from 'node:util';
import { instantiateComponent } from '../src/engine.cjs';
import { EngineHost } from '../src/host.cjs';
import {
  CaptchaAIError,
  PermanentError,
  SnapshotError,
  SolveClosedError,
  Solver,
  TransientError,
} from '../src/index.mjs';

const KEY = 'Leak0Canary0Key0Abcdef0123456789';
const TASK = { type: 'turnstile', sitekey: '0x4AAAAAAABkMYinukE8nzY', pageurl: 'https://portal.example.com/login' };
const offline = { fetch: () => Promise.reject(new Error('no network in this test')) };

/** Every way a value can be printed or serialised. */
function renderings(value) {
  const texts = [
    String(value),
    inspect(value, { depth: Infinity, showHidden: true, getters: true }),
    JSON.stringify(value) ?? '',
  ];
  if (value instanceof Error) texts.push(value.stack ?? '', value.message);
  return texts;
}

function assertNoKey(value, what) {
  for (const text of renderings(value)) assert.ok(!text.includes(KEY), `the key shows in ${what}: ${text}`);
}

test('the key never shows in the solver, a pending solve, snapshots or errors', () => {
  const solver = new Solver(KEY, { requestTimeoutMs: 10_000 }, { ...offline, threads: 2 });
  assertNoKey(solver, 'the solver');
  const pending = solver.start(TASK);
  assertNoKey(pending, 'a pending solve');
  const snapshot = pending.snapshot();
  assert.ok(snapshot.length > 100);
  assertNoKey(snapshot, 'the snapshot');
  assertNoKey(solver.resume(snapshot), 'a resumed solve');

  const refused = captured(() => solver.start({ ...TASK, pageurl: `https://x.example.com/?k=${KEY}`, sitekey: '' }));
  assert.ok(refused instanceof PermanentError);
  assertNoKey(refused, 'an INVALID_TASK error');
  const badKey = captured(() => new Solver(`${KEY}!`, {}, offline));
  assert.ok(badKey instanceof PermanentError);
  assert.equal(badKey.code, 'INVALID_KEY');
  for (const text of renderings(badKey)) assert.ok(!text.includes(KEY.slice(0, 16)), `the key shows: ${text}`);
});

function captured(fn) {
  try {
    fn();
  } catch (error) {
    return error;
  }
  assert.fail('expected an error');
}

test('an invalid task is a PermanentError naming the field, from the engine', () => {
  const solver = new Solver(KEY, {}, offline);
  const error = captured(() => solver.start({ type: 'recaptcha_v2', googlekey: 'x', pageurl: 'https://a.example.com/' }));
  assert.ok(error instanceof PermanentError && error instanceof CaptchaAIError);
  assert.equal(error.code, 'INVALID_TASK');
  assert.equal(error.origin, 'input');
  assert.equal(error.retryAfter, null);
  assert.equal(typeof error.field, 'string');
  const config = captured(() => new Solver(KEY, { pollIntervalMs: 1000 }, offline).start(TASK));
  assert.ok(config instanceof PermanentError);
  assert.equal(config.code, 'INVALID_CONFIG');
  assert.equal(config.field, 'poll_interval_ms');
});

test('values of the wrong type are TypeErrors naming what is wrong', async () => {
  assert.throws(() => new Solver(42), /apiKey must be a string/);
  assert.throws(() => new Solver(KEY, { pollIntervalMs: 5000.5 }, offline), /config.pollIntervalMs must be a non-negative integer/);
  assert.throws(() => new Solver(KEY, { pollintervalms: 5000 }, offline), /unknown config field "pollintervalms"/);
  assert.throws(() => new Solver(KEY, { baseUrl: 1 }, offline), /config.baseUrl must be a string/);
  assert.throws(() => new Solver(KEY, { maxPollErrors: -1 }, offline), /config.maxPollErrors/);
  assert.throws(() => new Solver(KEY, {}, { fetch: 'no' }), /options.fetch/);
  assert.throws(() => new Solver(KEY, {}, { ...offline, threads: 1.5 }), /threads must be a non-negative integer/);
  assert.throws(() => new Solver(KEY, {}, null), /options must be an object/);
  const solver = new Solver(KEY, {}, offline);
  assert.throws(() => solver.start(null), TypeError);
  assert.throws(() => solver.start([1]), TypeError);
  const cyclic = { type: 'turnstile' };
  cyclic.self = cyclic;
  assert.throws(() => solver.start(cyclic), /cannot be written as JSON/);
  assert.throws(() => solver.resume(42), TypeError);
  await assert.rejects(solver.run({}), TypeError);
});

test('an unknown solver or run option is a TypeError naming it, never ignored', async () => {
  assert.throws(() => new Solver(KEY, {}, { ...offline, thread: 4 }), (e) => e instanceof TypeError && /unknown solver option "thread"/.test(e.message));
  assert.throws(() => new Solver(KEY, {}, { timescale: 10 }), /unknown solver option "timescale" \(known: fetch, threads, timeScale, solveTimes\)/);
  const solver = new Solver(KEY, {}, { ...offline, threads: 1 });
  const pending = solver.start(TASK);
  await assert.rejects(solver.run(pending, { onCheckPoint: () => {} }), /unknown run option "onCheckPoint"/);
  await assert.rejects(solver.solve(TASK, { abortSignal: AbortSignal.timeout(1) }), /unknown run option "abortSignal"/);
  assert.equal(pending.open, true, 'refused before anything was sent');
});

test('timeScale is a number from 0.01 to 10000, like the CLI\'s --time-scale', () => {
  for (const scale of [0.01, 1, 50, 10_000]) assert.ok(new Solver(KEY, {}, { ...offline, timeScale: scale }));
  for (const scale of [0, 0.001, -1, 10_001, 1e300, Infinity]) {
    assert.throws(() => new Solver(KEY, {}, { ...offline, timeScale: scale }), (e) => e instanceof RangeError && /from 0.01 to 10000/.test(e.message), String(scale));
  }
  for (const scale of ['10', NaN, 10n]) {
    assert.throws(() => new Solver(KEY, {}, { ...offline, timeScale: scale }), TypeError, String(scale));
  }
});

test('a thread budget the engine refuses is a PermanentError', () => {
  const error = captured(() => new Solver(KEY, {}, { ...offline, threads: 0 }));
  assert.ok(error instanceof PermanentError, inspect(error));
});

test('unusable snapshots are SnapshotErrors with the engine\'s kind', () => {
  const solver = new Solver(KEY, {}, offline);
  const kinds = {
    'not json': 'malformed',
    '{"format":': 'truncated',
    '{"hello":"world"}': 'foreign',
  };
  for (const [snapshot, kind] of Object.entries(kinds)) {
    const error = captured(() => solver.resume(snapshot));
    assert.ok(error instanceof SnapshotError, inspect(error));
    assert.equal(error.kind, kind, snapshot);
  }
  const good = solver.start(TASK).snapshot();
  const other = JSON.parse(good);
  other.version = 999;
  assert.equal(captured(() => solver.resume(JSON.stringify(other))).kind, 'unsupported_version');
});

test('a finished or closed solve cannot be run again', async () => {
  const solver = new Solver(KEY, {}, offline);
  const pending = solver.start(TASK);
  pending.close();
  assert.equal(pending.open, false);
  await assert.rejects(solver.run(pending), (e) => e instanceof SolveClosedError && /finished or was closed/.test(e.message));
  for (const read of [() => pending.taskId, () => pending.deadline, () => pending.snapshot()]) {
    assert.throws(read, SolveClosedError);
  }
  const noRetries = new Solver(KEY, { maxSubmitRetries: 0 }, offline);
  const twice = noRetries.start(TASK);
  const first = noRetries.run(twice);
  await assert.rejects(noRetries.run(twice), /already being run/);
  // The offline fetch fails: a transport error the engine does not retry here.
  await assert.rejects(first, (e) => e instanceof TransientError && e.origin === 'no_answer');
  const other = new Solver(KEY, {}, offline);
  await assert.rejects(other.run(solver.start(TASK)), /from this solver/);
});

test('a trap replaces the instance, restores the solve and gives the same outputs', () => {
  const vector = JSON.parse(readFileSync(new URL('../../../testdata/vectors/type_recaptcha_v2.json', import.meta.url), 'utf8'));
  const drive = (host) => {
    const slot = host.create(JSON.stringify(vector.task), vector.key, {}, 0n);
    const outputs = [];
    let now = 0n;
    let output = host.pollOutput(slot, now);
    for (const { reply } of vector.script) {
      outputs.push(output);
      if (output.val.at > now) now = output.val.at;
      now += BigInt(reply.after_ms);
      output = host.handleResponse(slot, now, output.val.id, { status: reply.status, body: reply.body });
      if (output.tag === 'send') host.checkpoint(slot);
    }
    outputs.push(output);
    return outputs;
  };
  const expected = drive(new EngineHost());
  assert.equal(expected.at(-1).tag, 'solved');

  // The first instance traps (as a wasm `unreachable` would) on its third reply.
  let instances = 0;
  let replies = 0;
  const trapping = () => {
    const root = instantiateComponent();
    if (instances++ === 0) {
      const original = root.engine.Solve.prototype.handleResponse;
      root.engine.Solve.prototype.handleResponse = function (...args) {
        if (++replies === 3) throw new WebAssembly.RuntimeError('unreachable');
        return original.apply(this, args);
      };
    }
    return root;
  };
  const host = new EngineHost(trapping);
  const outputs = drive(host);
  assert.equal(host.recoveries, 1);
  assert.equal(instances, 2);
  assert.deepEqual(outputs, expected);
});
