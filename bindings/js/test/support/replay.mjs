// The golden-vector replayer (vectors/src/lib.rs `replay`, testdata/vectors/README.md) on the
// component as jco transpiled it. Events are built from the raw WIT values, so the transcript
// shows exactly what crossed the boundary.
import { canonicalJson } from './canonical.mjs';
import { engineResult } from '../../src/engine.cjs';
import { misuseKind } from '../../src/errors.cjs';

export const MAX_EVENTS = 1000;

/** Reply bytes to text, the WIT's way (the driver's decoder settings). */
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });

const CONFIG_FIELDS = {
  base_url: 'baseUrl',
  request_timeout_ms: 'requestTimeoutMs',
  deadline_ms: 'deadlineMs',
  initial_wait_ms: 'initialWaitMs',
  poll_interval_ms: 'pollIntervalMs',
  max_submit_retries: 'maxSubmitRetries',
  max_poll_errors: 'maxPollErrors',
  unsolvable_retries: 'unsolvableRetries',
  jitter_seed: 'jitterSeed',
  max_jitter_ms: 'maxJitterMs',
  poll_cost_ms: 'pollCostMs',
};
const U32 = new Set(['maxSubmitRetries', 'maxPollErrors', 'unsolvableRetries']);

/** The vector's config JSON as the WIT config record. */
export function witConfigFromJson(config) {
  const wit = {};
  for (const [name, value] of Object.entries(config)) {
    const field = CONFIG_FIELDS[name];
    if (!field) throw new Error(`unknown config field ${name}`);
    if (value === null) continue;
    wit[field] = field === 'baseUrl' || U32.has(field) ? value : BigInt(value);
  }
  return wit;
}

const KINDS = { submit: 'submit', poll: 'poll', 'threads-info': 'threads_info', balance: 'balance', report: 'report' };
const ORIGINS = { input: 'input', service: 'service', 'no-answer': 'no_answer' };

const opt = (value) => (value === undefined ? null : value);

export function failureJson(f) {
  return {
    code: f.code,
    class: f.class,
    origin: ORIGINS[f.origin] ?? `unknown origin ${f.origin}`,
    message: f.message,
    retry_after_ms: opt(f.retryAfterMs),
    field: opt(f.field),
    task_id: opt(f.taskId),
  };
}

export function solutionJson(s) {
  return {
    answer: { [s.answer.tag]: s.answer.val },
    user_agent: opt(s.userAgent),
    task_id: opt(s.taskId),
    submitted_at: s.submittedAt,
    solved_at: s.solvedAt,
    elapsed_ms: s.elapsedMs,
    polls: s.polls,
    attempts: s.attempts,
    expires_at: opt(s.expiresAt),
  };
}

export function outputEvent(at, output) {
  if (output.tag === 'send') {
    const r = output.val;
    const send = {
      id: r.id,
      kind: KINDS[r.kind] ?? `unknown kind ${r.kind}`,
      at: r.at,
      url: r.url,
      content_type: r.contentType,
      timeout_ms: r.timeoutMs,
    };
    if (r.body.tag === 'form') send.body = r.body.val;
    else send.body_base64 = Buffer.from(r.body.val).toString('base64');
    return { at, send };
  }
  if (output.tag === 'solved') return { at, solved: solutionJson(output.val) };
  return { at, failed: failureJson(output.val) };
}

/**
 * Replays `vector` through `root` (a component instance: `{engine, account}`) and returns the
 * transcript. `observe(kind, raw)` sees every terminal WIT value (for checks of the typed layer).
 */
export function replay(root, vector, observe = () => {}) {
  return replayFull(root, vector, observe).transcript;
}

/**
 * `replay`, also giving `solveTimesAfter`: with `vector.solve_times` (the solve is then created
 * with that model: `SolveTimes.fromText`, `Solve.createWithTimes`), the model's text after the
 * replay, having observed the solution when the solve was solved (else unchanged); else null.
 */
export function replayFull(root, vector, observe = () => {}) {
  if (vector.solve_times === undefined) return { transcript: replayWith(root, vector, null, observe), solveTimesAfter: null };
  const read = engineResult(() => root.engine.SolveTimes.fromText(vector.solve_times));
  if (read.err) {
    const at = BigInt(vector.start_ms ?? 0);
    return { transcript: [{ at, error: `solve_times refused: ${JSON.stringify(read.err)}` }], solveTimesAfter: null };
  }
  const times = read.ok;
  try {
    let solution = null;
    const transcript = replayWith(root, vector, times, (kind, raw) => {
      if (kind === 'solution') solution = raw;
      observe(kind, raw);
    });
    if (solution !== null) times.observe(solution);
    return { transcript, solveTimesAfter: times.toText() };
  } finally {
    times[Symbol.dispose]();
  }
}

function replayWith(root, vector, times, observe) {
  const { Solve } = root.engine;
  const events = [];
  let now = BigInt(vector.start_ms ?? 0);
  const event = (at, kind, body) => ({ at, [kind]: body });
  const task = canonicalJson(vector.task);
  const config = witConfigFromJson(vector.config ?? {});
  const created = engineResult(() =>
    times === null ? Solve.create(task, vector.key, config, now) : Solve.createWithTimes(task, vector.key, config, now, times),
  );
  if (created.err) {
    observe('failure', created.err);
    return [event(now, 'rejected', failureJson(created.err))];
  }
  let solve = created.ok;
  const restoreBefore = new Set(vector.restore_before ?? []);
  const stalls = new Map((vector.stall_before ?? []).map((stall) => [stall.send, BigInt(stall.until_ms)]));
  const script = [...vector.script];
  const call = (fn) => {
    const r = engineResult(fn);
    return r.err ? { misuse: misuseKind(r.err) } : { output: r.ok };
  };
  try {
    let step = call(() => solve.pollOutput(now));
    if (step.misuse) return [event(now, 'misuse', step.misuse)];
    let output = step.output;
    let sends = 0;
    while (events.length < MAX_EVENTS) {
      if (output.tag !== 'send') {
        events.push(outputEvent(now, output));
        observe(output.tag === 'solved' ? 'solution' : 'failure', output.val);
        const again = call(() => solve.pollOutput(now + 1000n));
        if (again.misuse || canonicalJson(again.output) !== canonicalJson(output)) {
          events.push(event(now + 1000n, 'error', 'terminal output was not sticky'));
        }
        return events;
      }
      let request = output.val;
      if (request.at > now) now = request.at;
      const stalled = stalls.has(sends);
      if (stalled) {
        const until = stalls.get(sends);
        if (until > now) now = until;
        events.push(event(now, 'stalled', true));
      }
      const restore = restoreBefore.has(sends);
      if (restore) {
        const snapshot = solve.snapshot();
        const restored = engineResult(() => Solve.restore(snapshot, vector.key));
        if (restored.err) {
          events.push(event(now, 'error', `restore failed: ${JSON.stringify(restored.err)}`));
          return events;
        }
        solve[Symbol.dispose]();
        solve = restored.ok;
        events.push(event(now, 'restored', true));
      }
      if (stalled || restore) {
        step = call(() => solve.pollOutput(now));
        if (step.misuse) {
          events.push(event(now, 'misuse', step.misuse));
          return events;
        }
        if (step.output.tag !== 'send') {
          output = step.output;
          continue;
        }
        request = step.output.val;
      }
      sends += 1;
      events.push(outputEvent(now, { tag: 'send', val: request }));
      const entry = script.shift();
      if (entry === undefined) {
        events.push(event(now, 'error', 'script exhausted'));
        return events;
      }
      if (entry === 'silence') {
        now += request.timeoutMs;
        events.push(event(now, 'transport', { id: request.id, error: 'timeout' }));
        step = call(() => solve.handleTransportError(now, request.id, 'timeout'));
      } else if (entry.transport) {
        const error = entry.transport.error;
        if (!['timeout', 'connect', 'broken'].includes(error)) {
          events.push(event(now, 'error', `unknown transport error ${error}`));
          return events;
        }
        now += BigInt(entry.transport.after_ms);
        events.push(event(now, 'transport', { id: request.id, error }));
        step = call(() => solve.handleTransportError(now, request.id, error));
      } else if (entry.reply) {
        const reply = entry.reply;
        const bytes = reply.body !== undefined ? new TextEncoder().encode(reply.body) : Buffer.from(reply.body_base64, 'base64');
        now += BigInt(reply.after_ms);
        const fed = { id: request.id, status: reply.status };
        if (reply.body !== undefined) fed.body = reply.body;
        else fed.body_base64 = reply.body_base64;
        events.push(event(now, 'reply', fed));
        const response = { status: reply.status, body: decoder.decode(bytes) };
        step = call(() => solve.handleResponse(now, request.id, response));
      } else {
        events.push(event(now, 'error', `unknown script entry ${JSON.stringify(entry)}`));
        return events;
      }
      if (step.misuse) {
        events.push(event(now, 'misuse', step.misuse));
        return events;
      }
      output = step.output;
    }
    events.push(event(now, 'error', 'too many events'));
    return events;
  } finally {
    solve[Symbol.dispose]();
  }
}
