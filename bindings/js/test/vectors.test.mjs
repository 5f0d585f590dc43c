// Every golden vector replayed through the component (as jco transpiled it) gives exactly the
// stored transcript, which the Rust replayer produces natively and through wasmtime.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { canonicalJson } from './support/canonical.mjs';
import { replay, replayFull } from './support/replay.mjs';
import { instantiateComponent } from '../src/engine.cjs';
import { EngineHost } from '../src/host.cjs';
import { Solution } from '../src/convert.cjs';
import { errorFromFailure, PermanentError, TransientError, UnsolvableError } from '../src/errors.cjs';

const VECTORS = new URL('../../../testdata/vectors/', import.meta.url);
const files = readdirSync(VECTORS)
  .filter((name) => name.endsWith('.json'))
  .sort();

test('the vector directory holds the full set', () => {
  assert.ok(files.length >= 80, `found ${files.length} vectors in ${VECTORS.pathname}`);
});

/** The first differing event, for a readable failure. */
function firstDifference(replayed, stored) {
  const n = Math.max(replayed.length, stored.length);
  for (let i = 0; i < n; i += 1) {
    const a = replayed[i] === undefined ? '(none)' : canonicalJson(replayed[i]);
    const b = stored[i] === undefined ? '(none)' : canonicalJson(stored[i]);
    if (a !== b) return `event ${i}\n  stored:   ${b}\n  replayed: ${a}`;
  }
  return 'no single event differs';
}

const ERROR_CLASSES = { permanent: PermanentError, transient: TransientError, unsolvable: UnsolvableError };

const root = instantiateComponent();
const host = new EngineHost();

for (const file of files) {
  test(`vector ${file}`, () => {
    const vector = JSON.parse(readFileSync(new URL(file, VECTORS), 'utf8'));
    const typedChecks = [];
    const { transcript, solveTimesAfter } = replayFull(root, vector, (kind, raw) => typedChecks.push([kind, raw]));
    const replayed = canonicalJson(transcript);
    const stored = canonicalJson(vector.transcript);
    assert.ok(replayed === stored, `${vector.name}: the transcript differs from the stored one at ${firstDifference(transcript, vector.transcript)}`);
    // With a solve-times model: the model after observing the solution, byte for byte.
    assert.equal(solveTimesAfter, vector.solve_times_after ?? null, `${vector.name}: the model after the solve differs`);

    // The typed layer over the same terminal values: the error class follows the failure class,
    // and the Solution's fields and client JSON agree with the transcript.
    for (const [kind, raw] of typedChecks) {
      if (kind === 'failure') {
        const error = errorFromFailure(raw);
        assert.ok(error instanceof ERROR_CLASSES[raw.class], `${raw.code} (${raw.class}) became ${error.name}`);
        assert.equal(error.code, raw.code);
        assert.equal(error.message, raw.message);
        assert.equal(error.taskId, raw.taskId ?? null);
        assert.equal(error.field, raw.field ?? null);
        assert.equal(error.retryAfter, raw.retryAfterMs === undefined ? null : Number(raw.retryAfterMs) / 1000);
        assert.equal(error.origin, { input: 'input', service: 'service', 'no-answer': 'no_answer' }[raw.origin]);
        assert.ok(!error.message.includes(vector.key), 'the key is not in the message');
      } else {
        const solution = new Solution(raw, host);
        const client = solution.toJSON();
        const expectedAnswer = raw.answer.tag === 'json' ? JSON.parse(raw.answer.val) : raw.answer.val;
        assert.deepEqual(client.answer, expectedAnswer);
        assert.deepEqual(solution.answer, expectedAnswer);
        assert.equal(solution.answerType, raw.answer.tag);
        assert.equal(solution.taskId, client.task_id);
        assert.equal(solution.userAgent, client.user_agent);
        assert.equal(solution.solvedAt, client.solved_at);
        assert.equal(solution.submittedAt, client.submitted_at);
        assert.equal(solution.expiresAt, client.expires_at);
        assert.equal(solution.polls, client.polls);
        assert.equal(solution.attempts, client.attempts);
        assert.equal(solution.isFresh(60_000, solution.solvedAt), true, 'fresh when just solved');
        assert.equal(solution.isFresh(60_000, solution.solvedAt + 60_001), false, 'stale after max age');
      }
    }
  });
}

test('a changed upstream reply changes the transcript (the comparison can fail)', () => {
  const vector = JSON.parse(readFileSync(new URL('type_recaptcha_v2.json', VECTORS), 'utf8'));
  const last = vector.script.at(-1).reply;
  last.body = last.body.replace('"status":1', '"status":0').replace(/"request":"[^"]*"/, '"request":"CAPCHA_NOT_READY"');
  const transcript = replay(root, vector);
  assert.notEqual(canonicalJson(transcript), canonicalJson(vector.transcript));
  assert.match(firstDifference(transcript, vector.transcript), /^event \d+/);
});
