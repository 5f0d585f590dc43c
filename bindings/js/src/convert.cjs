'use strict';
// Plain JavaScript values to and from the component's WIT values. Types only: what a value means
// and whether it is in range is the engine's decision.

/**
 * The values users pass and get (test/types/implementation.ts checks src/index.d.ts against them).
 * @typedef {{baseUrl?: string | null, requestTimeoutMs?: number | bigint | null, deadlineMs?: number | bigint | null,
 *   initialWaitMs?: number | bigint | null, pollIntervalMs?: number | bigint | null, maxSubmitRetries?: number | null,
 *   maxPollErrors?: number | null, unsolvableRetries?: number | null, jitterSeed?: number | bigint | null,
 *   maxJitterMs?: number | bigint | null, pollCostMs?: number | bigint | null}} Config
 * @typedef {{type: string}} Task a task object (the engine validates every field)
 * @typedef {string | number | boolean | null | JsonValue[] | {[key: string]: JsonValue}} JsonValue
 */

const U64_FIELDS = ['requestTimeoutMs', 'deadlineMs', 'initialWaitMs', 'pollIntervalMs', 'jitterSeed', 'maxJitterMs', 'pollCostMs'];
const U32_FIELDS = ['maxSubmitRetries', 'maxPollErrors', 'unsolvableRetries'];
const CONFIG_FIELDS = new Set(['baseUrl', ...U64_FIELDS, ...U32_FIELDS]);

/**
 * An integer 0..2^64-1 as a bigint (`number` must be a safe integer), or a TypeError.
 * @param {unknown} value
 * @param {string} name
 * @returns {bigint}
 */
function toU64(value, name) {
  if (typeof value === 'bigint' && value >= 0n && value < 1n << 64n) return value;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  throw new TypeError(`${name} must be a non-negative integer (got ${describe(value)})`);
}

/**
 * @param {unknown} value
 * @param {string} name
 * @returns {number}
 */
function toU32(value, name) {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 0xffff_ffff) return value;
  throw new TypeError(`${name} must be an integer from 0 to 4294967295 (got ${describe(value)})`);
}

/** @param {unknown} value */
function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'bigint') return `${value}n`;
  return String(value);
}

/**
 * The WIT `config` record for a user config (`{baseUrl, requestTimeoutMs, ...}`, every field
 * optional; `undefined` or `null` takes the engine's default).
 * @param {Config} config
 * @returns {Record<string, string | bigint | number>}
 */
function toWitConfig(config = {}) {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    throw new TypeError('config must be an object such as {requestTimeoutMs: 30000}');
  }
  /** @type {Record<string, string | bigint | number>} */
  const wit = {};
  for (const [name, value] of Object.entries(config)) {
    if (!CONFIG_FIELDS.has(name)) {
      throw new TypeError(`unknown config field ${JSON.stringify(name)} (known: ${[...CONFIG_FIELDS].join(', ')})`);
    }
    if (value === undefined || value === null) continue;
    if (name === 'baseUrl') {
      if (typeof value !== 'string') throw new TypeError(`config.baseUrl must be a string (got ${describe(value)})`);
      wit.baseUrl = value;
    } else if (U64_FIELDS.includes(name)) {
      wit[name] = toU64(value, `config.${name}`);
    } else {
      wit[name] = toU32(value, `config.${name}`);
    }
  }
  return wit;
}

/**
 * The task JSON text for a task object (or a task already given as JSON text).
 * @param {Task | string} task
 * @returns {string}
 */
function toTaskJson(task) {
  if (typeof task === 'string') return task;
  if (task === null || typeof task !== 'object' || Array.isArray(task)) {
    throw new TypeError('a task must be an object such as {type: "turnstile", sitekey, pageurl}');
  }
  try {
    return JSON.stringify(task);
  } catch (error) {
    throw new TypeError(`the task cannot be written as JSON: ${/** @type {Error} */ (error).message}`);
  }
}

/**
 * The engine calls a Solution needs (the solver's host).
 * @typedef {{isFresh(raw: any, now: bigint, maxAgeMs: bigint): boolean, solutionJson(raw: any): string}} SolutionEngine
 */

/** A solved captcha. Times are Unix epoch milliseconds. */
class Solution {
  #raw;
  #engine;

  /**
   * @param {any} raw the WIT solution (jco's raw value)
   * @param {SolutionEngine} engine answers `isFresh` and `toJSON`
   */
  constructor(raw, engine) {
    this.#raw = raw;
    this.#engine = engine;
    /** `'text'` (a token or text) or `'json'` (a structured answer, parsed into `answer`).
     * @type {'text' | 'json'} */
    this.answerType = raw.answer.tag;
    /** The token or text, or the structured answer as a parsed JSON value.
     * @type {string | JsonValue} */
    this.answer = raw.answer.tag === 'json' ? JSON.parse(raw.answer.val) : raw.answer.val;
    /** The solver's user agent where the type returns one (reuse it on the site); else null.
     * @type {string | null} */
    this.userAgent = raw.userAgent ?? null;
    /** The task id of the successful attempt (null for synchronous image answers).
     * @type {string | null} */
    this.taskId = raw.taskId ?? null;
    this.submittedAt = Number(raw.submittedAt);
    /** When the answer arrived; token lifetimes count from here. */
    this.solvedAt = Number(raw.solvedAt);
    this.elapsedMs = Number(raw.elapsedMs);
    /** Polls sent, over all attempts. @type {number} */
    this.polls = raw.polls;
    /** Tasks submitted (1 plus fresh resubmissions after an unsolvable answer). @type {number} */
    this.attempts = raw.attempts;
    /** When the token stops being usable, where the type's lifetime is known; else null. */
    this.expiresAt = raw.expiresAt === undefined ? null : Number(raw.expiresAt);
  }

  /**
   * Whether the answer may still be used at `now`: no older than `maxAgeMs`, not expired.
   * @param {number | bigint} maxAgeMs
   * @param {number | bigint} [now]
   * @returns {boolean}
   */
  isFresh(maxAgeMs, now = Date.now()) {
    return this.#engine.isFresh(this.#raw, toU64(now, 'now'), toU64(maxAgeMs, 'maxAgeMs'));
  }

  /** The engine's client JSON (`{answer, user_agent, task_id, submitted_at, ...}`), the same in every host.
   * @returns {{[key: string]: JsonValue}} */
  toJSON() {
    return JSON.parse(this.#engine.solutionJson(this.#raw));
  }
}

module.exports = { toU64, toWitConfig, toTaskJson, Solution };
