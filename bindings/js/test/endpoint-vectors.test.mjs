// Every endpoint vector case (testdata/vectors/endpoint) run through the component as jco
// transpiled it gives exactly the stored result (the one the Rust engine gives natively and
// through wasmtime): reading CaptchaAI requests, rendering CaptchaAI's replies, forwarding
// reports. The result's JSON shape is vectors/src/endpoint.rs's.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { canonicalJson } from './support/canonical.mjs';
import { failureJson, witConfigFromJson } from './support/replay.mjs';
import { engineResult, instantiateComponent } from '../src/engine.cjs';

const VECTORS = new URL('../../../testdata/vectors/endpoint/', import.meta.url);
const files = readdirSync(VECTORS)
  .filter((name) => name.endsWith('.json'))
  .sort();
const cases = files.flatMap((file) => {
  const vector = JSON.parse(readFileSync(new URL(file, VECTORS), 'utf8'));
  return vector.cases.map((c) => [vector.name, c]);
});

const root = instantiateComponent();
const { endpoint } = root;

const opt = (value) => (value === undefined ? null : value);
const witFormat = (f) => ({ json: f.json ?? false, cors: f.cors ?? false });
const formatJson = (f) => ({ json: f.json, cors: f.cors });
const replyJson = (r) => ({
  status: r.status,
  content_type: r.contentType,
  headers: r.headers.map((h) => [h.name, h.value]),
  body: r.body,
});
const refusalJson = (r) => ({ code: r.code, message: r.message, key: opt(r.key), reply: replyJson(r.reply) });

const ORIGINS = {
  INVALID_TASK: 'input',
  INVALID_KEY: 'input',
  INVALID_CONFIG: 'input',
  TRANSPORT_ERROR: 'no-answer',
  UNEXPECTED_REPLY: 'no-answer',
  DEADLINE_EXCEEDED: 'no-answer',
};
const big = (v) => (v === null || v === undefined ? undefined : BigInt(v));
const witFailure = (f) => ({
  code: f.code,
  class: f.class,
  origin: ORIGINS[f.code] ?? 'service',
  message: f.message,
  retryAfterMs: big(f.retry_after_ms),
  field: f.field ?? undefined,
  taskId: f.task_id ?? undefined,
});
const witSolution = (s) => {
  const [[tag, val]] = Object.entries(s.answer);
  return {
    answer: { tag, val },
    userAgent: s.user_agent ?? undefined,
    taskId: s.task_id ?? undefined,
    submittedAt: BigInt(s.submitted_at),
    solvedAt: BigInt(s.solved_at),
    elapsedMs: BigInt(s.elapsed_ms),
    polls: s.polls,
    attempts: s.attempts,
    expiresAt: big(s.expires_at),
  };
};
const witState = (s) => {
  if (s === 'pending') return { tag: 'pending' };
  if (s === 'not_found') return { tag: 'not-found' };
  if (s.solved) return { tag: 'solved', val: witSolution(s.solved) };
  return { tag: 'failed', val: witFailure(s.failed) };
};
const actionJson = (a) => {
  const name = a.tag.replaceAll('-', '_');
  return a.val === undefined ? name : { [name]: a.val };
};

/** A case's result, as vectors/src/endpoint.rs `run_case` writes it. */
function runCase(call) {
  const [[kind, c]] = Object.entries(call);
  switch (kind) {
    case 'read': {
      const path = { in_php: 'in-php', res_php: 'res-php' }[c.path];
      const params = c.params.map(([name, value]) => ({ name, value }));
      const uploads = (c.uploads ?? []).map((u) => ({ name: u.name, bytes: new Uint8Array(Buffer.from(u.base64, 'base64')) }));
      const got = engineResult(() => endpoint.readRequest(path, params, uploads));
      if (got.err) return { refusal: refusalJson(got.err) };
      const r = got.ok.val;
      if (got.ok.tag === 'submit') {
        return { submit: { key: r.key, task: JSON.parse(r.taskJson), task_type: r.taskType, format: formatJson(r.format) } };
      }
      return { res: { key: r.key, action: actionJson(r.action), format: formatJson(r.format) } };
    }
    case 'read_format': {
      const path = { in_php: 'in-php', res_php: 'res-php' }[c.path];
      const params = c.params.map(([name, value]) => ({ name, value }));
      return { format: formatJson(endpoint.readFormat(path, params)) };
    }
    case 'submitted':
      return { reply: replyJson(endpoint.renderSubmitted(witFormat(c.format), c.task_type, c.id)) };
    case 'state':
      return { reply: replyJson(endpoint.renderState(witFormat(c.format), c.task_type, witState(c.state))) };
    case 'states':
      return { reply: replyJson(endpoint.renderStates(witFormat(c.format), c.states.map(witState))) };
    case 'threads': {
      const threads = BigInt(c.threads);
      const working = BigInt(c.working_threads);
      const info = { threads, workingThreads: working, free: threads > working ? threads - working : 0n };
      return { reply: replyJson(endpoint.renderThreads(witFormat(c.format), info)) };
    }
    case 'balance':
      return { reply: replyJson(endpoint.renderBalance(witFormat(c.format), c.balance)) };
    case 'reported':
      return { reply: replyJson(endpoint.renderReported(witFormat(c.format))) };
    case 'failure':
      return { reply: replyJson(endpoint.renderFailure(witFormat(c.format), witFailure(c.failure))) };
    case 'refusal': {
      const format = c.format === null ? undefined : witFormat(c.format);
      return { refusal: refusalJson(endpoint.renderRefusal(format, c.refusal.replaceAll('_', '-'))) };
    }
    case 'report': {
      const got = engineResult(() => endpoint.reportRequest(c.key, witConfigFromJson(c.config ?? {}), c.task_id, c.good));
      if (got.err) return { rejected: failureJson(got.err) };
      const r = got.ok;
      assert.equal(r.body.tag, 'form');
      return {
        send: { id: r.id, kind: r.kind, at: r.at, url: r.url, content_type: r.contentType, timeout_ms: r.timeoutMs, body: r.body.val },
      };
    }
    case 'parse_report': {
      const reply = c.reply.reply ? { tag: 'ok', val: { status: c.reply.reply.status, body: c.reply.reply.body } } : { tag: 'err', val: c.reply.transport };
      const got = engineResult(() => endpoint.parseReport(reply));
      return got.err ? { failed: failureJson(got.err) } : { recorded: true };
    }
    default:
      throw new Error(`unknown call ${kind}`);
  }
}

test('the endpoint vectors are there', () => {
  assert.ok(files.length >= 4 && cases.length >= 100, `found ${cases.length} cases in ${files.length} files`);
});

test('every endpoint case gives its stored result', () => {
  const differing = [];
  for (const [name, c] of cases) {
    assert.ok(c.result, `${name} / ${c.about} has no stored result`);
    const result = canonicalJson(runCase(c.call));
    if (result !== canonicalJson(c.result)) differing.push(`${name} / ${c.about}\n  stored:   ${canonicalJson(c.result)}\n  replayed: ${result}`);
  }
  assert.deepEqual(differing, [], `${differing.length} cases differ:\n${differing.join('\n')}`);
});

test('a changed request changes the result (the comparison can fail)', () => {
  const [, turnstile] = cases.find(([, c]) => c.about === 'SDK turnstile');
  const params = turnstile.call.read.params.filter(([name]) => name !== 'pageurl');
  const result = runCase({ read: { path: 'in_php', params } });
  assert.equal(result.refusal.code, 'ERROR_PAGEURL');
  assert.notEqual(canonicalJson(result), canonicalJson(turnstile.result));
});
