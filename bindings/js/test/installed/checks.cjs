'use strict';
// What a user of the installed package does, run under each runtime (Node, Bun, Deno) from an
// empty project outside the repository, once through `import` (check.mjs) and once through
// `require` (check.cjs), against the emulator test/installed.test.mjs started. Plain code, no
// test framework: it prints one line per check and exits non-zero on the first failure.
const assert = require('node:assert/strict');
const { inspect } = require('node:util');

/** The arguments test/installed.test.mjs passes: one JSON object. */
function options() {
  const text = process.argv[process.argv.length - 1];
  return JSON.parse(text);
}

/** Every way a value can be printed or serialised here. */
function renderings(value) {
  const texts = [String(value), inspect(value, { depth: Infinity, showHidden: true }), JSON.stringify(value) ?? ''];
  if (value instanceof Error) texts.push(value.stack ?? '', value.message);
  return texts;
}

async function failure(promise) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

/**
 * Runs the checks with `pkg` (the package as this entry loaded it) and `other` (as the other
 * entry loads it): both must be one package.
 */
async function run(pkg, other, entry) {
  const o = options();
  const { Solver, PermanentError, TransientError, UnsolvableError, CaptchaAIError, SnapshotError } = pkg;
  const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : typeof Deno !== 'undefined' ? `deno ${Deno.version.deno}` : `node ${process.version}`;
  const checks = [];
  const check = async (name, fn) => {
    await fn();
    checks.push(name);
    console.log(`  ok ${name}`);
  };
  const solver = (key = o.key, config = {}, options = {}) =>
    new Solver(key, { baseUrl: o.url, ...config }, { timeScale: o.timeScale, ...options });

  await check('one package whichever way it is loaded', () => {
    for (const name of ['Solver', 'PendingSolve', 'Solution', 'CaptchaAIError', 'PermanentError', 'TransientError', 'UnsolvableError', 'SnapshotError', 'EngineMisuseError']) {
      assert.equal(typeof pkg[name], 'function', name);
      assert.equal(other[name], pkg[name], `${name} is the same object through import and require`);
    }
  });

  await check('bad input is a typed error', () => {
    const s = solver();
    const missing = (() => {
      try {
        s.start({ type: 'turnstile', pageurl: 'https://portal.example.com/' });
      } catch (error) {
        return error;
      }
    })();
    assert.ok(missing instanceof PermanentError && missing instanceof CaptchaAIError, String(missing));
    assert.equal(missing.code, 'INVALID_TASK');
    assert.equal(missing.field, 'sitekey');
    assert.equal(missing.origin, 'input');
    assert.throws(() => s.start('{"type":'), PermanentError);
    assert.throws(() => s.start(42), TypeError);
    assert.throws(() => new Solver(o.key, { pollIntervalMs: 'soon' }), TypeError);
    assert.throws(() => s.resume('{"not":"a snapshot"}'), SnapshotError);
  });

  await check('a Turnstile solve', async () => {
    const solution = await solver().solve({ type: 'turnstile', sitekey: '0x4AAAAAAABkMYinukE8nzY', pageurl: 'https://portal.example.com/login' });
    assert.equal(solution.answerType, 'text');
    assert.ok(typeof solution.answer === 'string' && solution.answer.length > 20, solution.answer);
    assert.match(solution.taskId, /^\d+$/);
    assert.ok(solution.expiresAt > solution.solvedAt);
    assert.ok(solution.isFresh(60_000, solution.solvedAt));
    assert.equal(solution.toJSON().answer, solution.answer);
  });

  await check('a GeeTest v4 solve (a JSON answer) and an image sent as multipart bytes, at once', async () => {
    const s = solver();
    const [geetest, image] = await Promise.all([
      s.solve({ type: 'geetest_v4', captcha_id: 'e392e1d7fd421dc63325744d5a2b9c73', pageurl: 'https://portal.example.com/' }),
      s.solve({ type: 'image', image: o.image, upload: 'multipart', phrase: true }),
    ]);
    assert.equal(geetest.answerType, 'json');
    assert.ok(geetest.answer && typeof geetest.answer === 'object' && Object.keys(geetest.answer).length > 0);
    assert.ok(typeof image.answer === 'string' && image.answer.length > 0);
  });

  await check('an unsolvable captcha is an UnsolvableError', async () => {
    const error = await failure(
      solver(o.key, { unsolvableRetries: 0 }).solve({ type: 'recaptcha_v2', sitekey: o.unsolvableSitekey, pageurl: 'https://portal.example.com/' }),
    );
    assert.ok(error instanceof UnsolvableError, String(error));
    assert.equal(error.origin, 'service');
  });

  await check('nothing listening is a TransientError without an answer', async () => {
    const s = new Solver(o.key, { baseUrl: o.closedUrl, maxSubmitRetries: 0 }, { timeScale: o.timeScale });
    const error = await failure(s.solve({ type: 'turnstile', sitekey: '0x4AAAAAAABkMYinukE8nzY', pageurl: 'https://portal.example.com/' }));
    assert.ok(error instanceof TransientError, String(error));
    assert.equal(error.origin, 'no_answer');
  });

  await check('snapshot after a checkpoint, resume, solve', async () => {
    const s = solver();
    const stop = new AbortController();
    let snapshot = null;
    const stopped = await failure(
      s.run(s.start({ type: 'recaptcha_v2', sitekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-', pageurl: 'https://portal.example.com/' }), {
        signal: stop.signal,
        onCheckpoint: (text) => {
          snapshot = text;
          stop.abort(new Error('stopped after the first checkpoint'));
        },
      }),
    );
    assert.match(stopped.message, /stopped after the first checkpoint/);
    assert.ok(snapshot && !snapshot.includes(o.key));
    const resumed = s.resume(snapshot);
    const taskId = resumed.taskId;
    assert.match(taskId, /^\d+$/, 'the checkpoint came after the accepted submit');
    const solution = await s.run(resumed);
    assert.equal(solution.taskId, taskId, 'the resumed solve polls the same task');
    assert.ok(solution.answer.length > 20);
  });

  await check('account calls and the thread budget', async () => {
    const info = await solver().threadsInfo();
    assert.equal(info.threads, o.threads);
    assert.equal(typeof (await solver().balance()), 'number');
    const s = solver(o.key, {}, { threads: 1 });
    const task = { type: 'recaptcha_v2', sitekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-', pageurl: 'https://portal.example.com/' };
    const both = Promise.all([s.solve(task), s.solve(task)]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(s.budget(), { capacity: 1, running: 1, queued: 1 });
    const [a, b] = await both;
    assert.notEqual(a.taskId, b.taskId);
    assert.deepEqual(s.budget(), { capacity: 1, running: 0, queued: 0 });
  });

  await check('the key shows nowhere', async () => {
    const s = solver(o.unknownKey);
    const error = await failure(s.solve({ type: 'turnstile', sitekey: '0x4AAAAAAABkMYinukE8nzY', pageurl: 'https://portal.example.com/' }));
    assert.ok(error instanceof PermanentError, String(error));
    const pending = s.start({ type: 'turnstile', sitekey: '0x4AAAAAAABkMYinukE8nzY', pageurl: 'https://portal.example.com/' });
    for (const value of [s, pending, pending.snapshot(), error]) {
      for (const text of renderings(value)) assert.ok(!text.includes(o.unknownKey), `the key shows: ${text}`);
    }
  });

  console.log(`installed package OK: ${runtime}, ${entry}, ${checks.length} checks`);
}

module.exports = { run };
