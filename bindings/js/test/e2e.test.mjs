// End to end against the real CaptchaAI emulator (a child process on 127.0.0.1, killed at the
// end): solves, failure classes, snapshot/resume, account calls and the thread budget. Time runs
// TIME_SCALE times faster on both sides, so a 15 s first wait takes 0.75 s.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { inspect } from 'node:util';
import { createServer } from 'node:net';
import { startEmulator } from './support/emulator.mjs';
import { PermanentError, Solver, TransientError, UnsolvableError } from '../src/index.js';

const KEY = 'e2e0key0000000000000000000000001';
const UNKNOWN_KEY = 'e2e0key0000000000000000000000999';
const THREADS = 3;
const TIME_SCALE = 20;
const SITEKEY = '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-';
const UNSOLVABLE_SITEKEY = '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_XXX';
const recaptcha = (sitekey = SITEKEY) => ({ type: 'recaptcha_v2', sitekey, pageurl: 'https://portal.example.com/export' });

let emulator;
before(async () => {
  emulator = await startEmulator([
    '--key', `${KEY}:${THREADS}`,
    '--time-scale', String(TIME_SCALE),
    '--solve-time', 'all=18000:22000',
    '--unsolvable-sitekey', UNSOLVABLE_SITEKEY,
    '--ban-after-bad-keys', '0',
  ]);
});
after(async () => {
  await emulator?.stop();
});

/** A loopback URL whose port was just freed: nothing listens there. */
async function closedPortUrl() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

const solver = (key = KEY, config = {}, options = {}) =>
  new Solver(key, { baseUrl: emulator.url, ...config }, { timeScale: TIME_SCALE, ...options });

test('a reCAPTCHA v2 solve against the emulator', { timeout: 60_000 }, async () => {
  const solution = await solver().solve(recaptcha());
  assert.equal(solution.answerType, 'text');
  assert.equal(typeof solution.answer, 'string');
  assert.ok(solution.answer.length > 20, `a token: ${solution.answer}`);
  assert.match(solution.taskId, /^\d+$/);
  assert.equal(solution.attempts, 1);
  assert.ok(solution.polls >= 1);
  assert.ok(solution.solvedAt > solution.submittedAt);
  assert.ok(solution.isFresh(60_000, solution.solvedAt));
  assert.equal(solution.toJSON().answer, solution.answer);
});

test('an unsolvable captcha ends as UnsolvableError with the code and task id', { timeout: 60_000 }, async () => {
  const error = await solver(KEY, { unsolvableRetries: 0 }).solve(recaptcha(UNSOLVABLE_SITEKEY)).then(
    () => assert.fail('solved an unsolvable captcha'),
    (e) => e,
  );
  assert.ok(error instanceof UnsolvableError, `${inspect(error)}`);
  assert.equal(error.code, 'ERROR_CAPTCHA_UNSOLVABLE');
  assert.equal(error.origin, 'service');
  assert.match(error.taskId, /^\d+$/);
});

test('an unknown key ends as PermanentError from the service, and the key is nowhere in it', { timeout: 60_000 }, async () => {
  const error = await solver(UNKNOWN_KEY).solve(recaptcha()).then(
    () => assert.fail('solved with an unknown key'),
    (e) => e,
  );
  assert.ok(error instanceof PermanentError, `${inspect(error)}`);
  assert.equal(error.origin, 'service');
  assert.equal(error.taskId, null);
  for (const text of [error.message, error.stack, inspect(error, { depth: 5, showHidden: true }), JSON.stringify(error)]) {
    assert.ok(!text.includes(UNKNOWN_KEY), `the key leaked: ${text}`);
  }
});

test('nothing listening: transport failures end as TransientError (no answer)', { timeout: 60_000 }, async () => {
  const closed = await closedPortUrl();
  const s = new Solver(KEY, { baseUrl: closed, maxSubmitRetries: 1 }, { timeScale: TIME_SCALE });
  const error = await s.solve(recaptcha()).then(
    () => assert.fail('solved without a server'),
    (e) => e,
  );
  assert.ok(error instanceof TransientError, `${inspect(error)}`);
  assert.equal(error.origin, 'no_answer');
  assert.equal(typeof error.retryAfter === 'number' || error.retryAfter === null, true);
});

test('snapshot and resume: a solve interrupted after a checkpoint finishes from it', { timeout: 60_000 }, async () => {
  const s = solver();
  const pending = s.start(recaptcha());
  const checkpoints = [];
  const stop = new AbortController();
  const interrupted = await s
    .run(pending, {
      signal: stop.signal,
      onCheckpoint: (snapshot) => {
        checkpoints.push(snapshot);
        stop.abort(new Error('interrupted after the first checkpoint'));
      },
    })
    .then(
      () => assert.fail('finished despite the abort'),
      (e) => e,
    );
  assert.match(interrupted.message, /interrupted after the first checkpoint/);
  assert.equal(pending.open, false, 'run closes the solve when it stops');
  assert.equal(checkpoints.length, 1);
  const snapshot = checkpoints[0];
  assert.ok(!snapshot.includes(KEY), 'the snapshot never holds the key');

  const resumed = s.resume(snapshot);
  const taskId = resumed.taskId;
  assert.match(taskId, /^\d+$/, 'the snapshot was taken after the submit was accepted');
  const solution = await s.run(resumed);
  assert.equal(solution.taskId, taskId, 'the resumed solve polls the same task');
  assert.ok(solution.answer.length > 20);
});

test('threadsInfo and balance through the engine', { timeout: 30_000 }, async () => {
  const s = solver();
  const info = await s.threadsInfo();
  assert.equal(info.threads, THREADS);
  assert.equal(info.free, info.threads - info.workingThreads);
  const balance = await s.balance();
  assert.equal(typeof balance, 'number');
  assert.ok(Number.isFinite(balance));
  await assert.rejects(solver(UNKNOWN_KEY).threadsInfo(), (e) => e instanceof PermanentError && !e.message.includes(UNKNOWN_KEY));
});

test('the thread budget keeps at most `threads` solves in flight', { timeout: 90_000 }, async () => {
  let running = 0;
  let mostRunning = 0;
  const s = solver(KEY, {}, {
    threads: 2,
    fetch: (url, init) => {
      const budget = s.budget();
      running = budget.running;
      mostRunning = Math.max(mostRunning, running);
      return fetch(url, init);
    },
  });
  const solutions = await Promise.all([1, 2, 3, 4].map(() => s.solve(recaptcha())));
  assert.equal(solutions.length, 4);
  assert.ok(solutions.every((x) => x.answer.length > 20));
  assert.equal(mostRunning, 2, 'two solves ran at once, never more');
  assert.deepEqual(s.budget(), { capacity: 2, running: 0, queued: 0 });
});
