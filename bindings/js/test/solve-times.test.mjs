// Adaptive polling from JavaScript: the solver keeps one solve-times model per captcha type,
// learns from its own solves against the emulator, and a later solver continues from the saved
// models; refused models are typed errors.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startEmulator } from './support/emulator.mjs';
import { Solver, SolveTimesError } from '../src/index.mjs';

const KEY = 'e2e0key0000000000000000000000002';
// Slower than the other suites' 50x: an answer found at the first poll counts as late (and stops
// the learning) past the table's first wait plus 2.5 s, which at 50x is 50 ms of real latency, a
// margin a loaded CI machine (Bun, Deno and Node suites run beside this one) can exceed.
const TIME_SCALE = 10;
const TABLE_FIRST_WAIT_MS = 13_000; // Turnstile's first wait in the engine's type table
const turnstile = () => ({ type: 'turnstile', sitekey: '0x4AAAAAAAB-adaptive', pageurl: 'https://portal.example.com/login' });

let emulator;
before(async () => {
  // Turnstile answers in 3-4 s (virtual), well before the table's first poll.
  emulator = await startEmulator(['--key', `${KEY}:60`, '--time-scale', String(TIME_SCALE), '--solve-time', 'turnstile=3000:4000']);
});
after(async () => {
  await emulator?.stop();
});

const solver = (options = {}) => new Solver(KEY, { baseUrl: emulator.url }, { timeScale: TIME_SCALE, ...options });

test('a solver learns its first wait and a later solver continues from the saved models', { timeout: 60_000 }, async () => {
  const learning = solver();
  assert.deepEqual(learning.firstWaits(), {});
  for (let wave = 0; wave < 3; wave += 1) {
    // A model only applies to solves created after it learned: solve in waves.
    await Promise.all(Array.from({ length: 10 }, () => learning.solve(turnstile())));
  }
  const learned = learning.firstWaits().turnstile;
  assert.ok(learned !== null && learned < TABLE_FIRST_WAIT_MS, `learned first wait ${learned}`);
  const saved = learning.solveTimes();
  assert.deepEqual(Object.keys(saved), ['turnstile']);
  assert.ok(!saved.turnstile.includes(KEY) && saved.turnstile.length <= 1024);

  assert.ok((await solver().solve(turnstile())).elapsedMs >= TABLE_FIRST_WAIT_MS, 'no model: the table');
  const continued = solver({ solveTimes: JSON.parse(JSON.stringify(saved)) });
  assert.deepEqual(continued.firstWaits(), { turnstile: learned });
  assert.ok((await continued.solve(turnstile())).elapsedMs < TABLE_FIRST_WAIT_MS, 'answered at the learned first poll');
});

test('refused models are SolveTimesErrors', () => {
  const saved = solver().solveTimes();
  assert.deepEqual(saved, {});
  assert.throws(() => solver({ solveTimes: { turnstile: 'not json' } }), (e) => e instanceof SolveTimesError && e.kind === 'malformed');
  assert.throws(() => solver({ solveTimes: { turnstile: '{"format":"x"}' } }), (e) => e instanceof SolveTimesError && e.kind === 'foreign');
});

test('a model saved under another type is refused', { timeout: 60_000 }, async () => {
  const learning = solver();
  await learning.solve(turnstile());
  const text = learning.solveTimes().turnstile;
  assert.throws(() => solver({ solveTimes: { recaptcha_v2: text } }), (e) => e instanceof SolveTimesError && e.kind === 'invalid');
  assert.throws(() => solver({ solveTimes: { turnstile: 42 } }), TypeError);
});
