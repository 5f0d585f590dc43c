// End to end against the real CaptchaAI emulator (a child process on 127.0.0.1, killed at the
// end): solves, failure classes, snapshot/resume, account calls and the thread budget. Time runs
// TIME_SCALE times faster on both sides, so a 26 s first wait takes 1.3 s.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { inspect } from 'node:util';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { startEmulator } from './support/emulator.mjs';
import { PermanentError, Solver, TransientError, UnsolvableError } from '../src/index.mjs';

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

test('other families: an image sent as multipart bytes, GeeTest v4 (a JSON answer), Turnstile', { timeout: 60_000 }, async () => {
  const vectorTask = (name) => JSON.parse(readFileSync(new URL(`../../../testdata/vectors/${name}.json`, import.meta.url), 'utf8')).task;
  const s = solver();
  const [image, geetest, turnstile] = await Promise.all([
    s.solve(vectorTask('type_image_multipart')),
    s.solve(vectorTask('type_geetest_v4')),
    s.solve({ type: 'turnstile', sitekey: '0x4AAAAAAABkMYinukE8nzY', pageurl: 'https://portal.example.com/login' }),
  ]);
  assert.equal(image.answerType, 'text');
  assert.ok(image.answer.length > 0);
  assert.equal(geetest.answerType, 'json');
  assert.equal(typeof geetest.answer, 'object');
  assert.ok(Object.keys(geetest.answer).length > 0, JSON.stringify(geetest.answer));
  assert.equal(turnstile.answerType, 'text');
  assert.ok(turnstile.expiresAt > turnstile.solvedAt, 'Turnstile tokens have a known lifetime');
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
  // Counted on the wire: a solve is in flight from its accepted submit to the reply with its answer.
  let inFlight = 0;
  let mostInFlight = 0;
  const counting = async (url, init) => {
    const response = await fetch(url, init);
    const body = await response.clone().text();
    if (url.endsWith('/in.php') && body.includes('"status":1')) inFlight += 1;
    if (url.endsWith('/res.php') && body.includes('"status":1')) inFlight -= 1;
    mostInFlight = Math.max(mostInFlight, inFlight);
    return response;
  };
  const s = solver(KEY, {}, { threads: 2, fetch: counting });
  const solutions = await Promise.all([1, 2, 3, 4, 5].map(() => s.solve(recaptcha())));
  assert.equal(solutions.length, 5);
  assert.ok(solutions.every((x) => x.answer.length > 20));
  assert.equal(new Set(solutions.map((x) => x.taskId)).size, 5);
  assert.equal(mostInFlight, 2, 'two solves ran at once, never more');
  assert.equal(inFlight, 0);
  assert.deepEqual(s.budget(), { capacity: 2, running: 0, queued: 0 });
});

test('without `threads`, the plan\'s threads hold more solves than it has (one threadsinfo)', { timeout: 90_000 }, async () => {
  // Four times as many solves as the plan's threads at once: without the budget the extra ones
  // wait on CaptchaAI's busy answers and some reach their deadline.
  const actions = [];
  const logging = async (url, init) => {
    const response = await fetch(url, init);
    const body = await response.clone().text();
    actions.push(url.endsWith('/in.php') ? 'submit' : new URLSearchParams(init.body).get('action'));
    if (body.includes('ERROR_NO_SLOT_AVAILABLE')) actions.push('busy');
    return response;
  };
  const s = solver(KEY, {}, { fetch: logging });
  assert.equal(s.budget(), null, 'not read before the first solve');
  const solutions = await Promise.all(Array.from({ length: 4 * THREADS }, () => s.solve(recaptcha())));
  assert.ok(solutions.every((x) => x.answer.length > 20));
  assert.equal(actions.filter((a) => a === 'threadsinfo').length, 1);
  assert.equal(actions.filter((a) => a === 'submit').length, 4 * THREADS);
  assert.ok(!actions.includes('busy'), 'never turned away for busy threads');
  assert.deepEqual(s.budget(), { capacity: THREADS, running: 0, queued: 0 });
});

test('a run aborted while queued for the budget is withdrawn and closed', { timeout: 60_000 }, async () => {
  const s = solver(KEY, {}, { threads: 1 });
  const first = s.solve(recaptcha());
  const stop = new AbortController();
  const queued = s.start(recaptcha());
  const waiting = s.run(queued, { signal: stop.signal });
  // Once the run has joined the budget's queue (the budget's own count shows it).
  while (s.budget().queued === 0) await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(s.budget(), { capacity: 1, running: 1, queued: 1 });
  stop.abort(new Error('no longer needed'));
  await assert.rejects(waiting, /no longer needed/);
  assert.equal(queued.open, false);
  assert.deepEqual(s.budget(), { capacity: 1, running: 1, queued: 0 });
  assert.ok((await first).answer.length > 20);
  assert.deepEqual(s.budget(), { capacity: 1, running: 0, queued: 0 });
});

test('a solve queued for the thread budget starts its deadline when admitted', { timeout: 60_000 }, async () => {
  // One thread, three reCAPTCHA solves of about 30 s each (virtual), 40 s deadlines: created
  // up front, the later ones would expire in the queue without sending anything.
  const s = solver(KEY, { deadlineMs: 40_000 }, { threads: 1 });
  const solutions = await Promise.all([0, 1, 2].map(() => s.solve(recaptcha())));
  for (const solution of solutions) assert.ok(solution.answer.length > 20);
});

test('bad run options are refused before anything is sent', { timeout: 30_000 }, async () => {
  let sent = 0;
  const s = solver(KEY, {}, { fetch: (...args) => ((sent += 1), fetch(...args)) });
  const pending = s.start(recaptcha());
  await assert.rejects(s.run(pending, { onCheckpoint: 5 }), TypeError);
  await assert.rejects(s.run(pending, { signal: 'stop' }), TypeError);
  await assert.rejects(s.run(pending, null), TypeError);
  await assert.rejects(s.solve(recaptcha(), { onCheckpoint: 'x' }), TypeError);
  assert.equal(sent, 0, 'no paid task was left behind');
  assert.equal(pending.open, true);
  pending.close();
});

test('a snapshot resumed on a clock that is behind waits until its time', { timeout: 60_000 }, async () => {
  // The first solver's scaled clock runs ahead of a solver made later (as another machine's
  // clock might): resuming there waits until the snapshot's time instead of failing.
  const first = solver();
  const stop = new AbortController();
  let snapshot = null;
  await first
    .run(first.start(recaptcha()), {
      signal: stop.signal,
      onCheckpoint: (taken) => {
        snapshot = taken;
        stop.abort(new Error('checkpointed'));
      },
    })
    .catch(() => {});
  assert.ok(snapshot, 'a checkpoint after the submit');
  const behind = solver();
  const solution = await behind.run(behind.resume(snapshot));
  assert.ok(solution.answer.length > 20);
});
