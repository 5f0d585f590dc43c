'use strict';
// The fetch-based driver. It moves bytes and sleeps: what to send, when, how long to wait for it,
// what a reply means and when to stop all come from the engine.
const { Solution, toTaskJson, toWitConfig } = require('./convert.cjs');
const { engineResult } = require('./engine.cjs');
const { EngineMisuseError, SolveClosedError, errorFromFailure } = require('./errors.cjs');
const { ThreadBudget } = require('./gate.cjs');
const { EngineHost } = require('./host.cjs');
const { Clock, send } = require('./transport.cjs');

/**
 * @typedef {import('./convert.cjs').Config} Config
 * @typedef {import('./convert.cjs').Task} Task
 * @typedef {{fetch?: typeof globalThis.fetch, threads?: number, timeScale?: number,
 *   solveTimes?: Record<string, string>}} SolverOptions
 * @typedef {{onCheckpoint?: (snapshot: string) => unknown, signal?: AbortSignal}} RunOptions
 * @typedef {{threads: number, workingThreads: number, free: number}} ThreadsInfo
 * @typedef {InstanceType<typeof import('./host.cjs').Slot>} Slot
 * @typedef {InstanceType<typeof import('./host.cjs').EngineHost>} EngineHost
 * @typedef {InstanceType<typeof import('./gate.cjs').ThreadBudget>} ThreadBudget
 * @typedef {InstanceType<typeof import('./convert.cjs').Solution>} Solution
 */

/**
 * Refuses keys of `options` that are not in `known` (a misspelt option must not be ignored).
 * @param {object} options
 * @param {string[]} known
 * @param {string} what
 */
function checkKeys(options, known, what) {
  for (const name of Object.keys(options)) {
    if (!known.includes(name)) {
      throw new TypeError(`unknown ${what} ${JSON.stringify(name)} (known: ${known.join(', ')})`);
    }
  }
}

const SOLVER_OPTIONS = ['fetch', 'threads', 'timeScale', 'solveTimes'];
const RUN_OPTIONS = ['onCheckpoint', 'signal'];

/**
 * `run`'s options, checked before anything is sent (a bad one must not orphan a paid task).
 * @param {RunOptions} options
 * @returns {RunOptions}
 */
function runOptions(options) {
  if (options === null || typeof options !== 'object') throw new TypeError('run options must be an object');
  checkKeys(options, RUN_OPTIONS, 'run option');
  const { onCheckpoint, signal } = options;
  if (onCheckpoint !== undefined && typeof onCheckpoint !== 'function') {
    throw new TypeError('options.onCheckpoint must be a function');
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('options.signal must be an AbortSignal');
  return { onCheckpoint, signal };
}

/** The captcha type in task JSON, or null.
 * @param {string} json */
function typeOf(json) {
  try {
    const type = JSON.parse(json)?.type;
    return typeof type === 'string' ? type : null;
  } catch {
    return null;
  }
}

/** What `util.inspect` (Node, Bun, Deno) prints for an object, without importing node:util. */
const INSPECT = Symbol.for('nodejs.util.inspect.custom');

/** A solve created in the engine and not finished yet: run it with `solver.run(pending)`. */
class PendingSolve {
  #host;
  #slot;

  /**
   * @param {EngineHost} host
   * @param {Slot} slot
   */
  constructor(host, slot) {
    this.#host = host;
    this.#slot = slot;
  }

  /** The solve's whole state as versioned JSON, without the key (it holds the task). */
  snapshot() {
    return this.#host.snapshot(this.#slot);
  }

  /** The CaptchaAI task id once a submit was accepted; else null. */
  get taskId() {
    return this.#host.taskId(this.#slot);
  }

  /** When the deadline passes (epoch ms) once the first submit was sent; else null. */
  get deadline() {
    return this.#host.deadline(this.#slot);
  }

  /** Whether the solve can still run (not finished, not closed). */
  get open() {
    return this.#host.isOpen(this.#slot);
  }

  /** Frees the solve in the engine (run does this when it ends). */
  close() {
    this.#host.drop(this.#slot);
  }

  [Symbol.dispose]() {
    this.close();
  }

  /** Used by Solver only.
   * @param {unknown} pending
   * @param {EngineHost} host
   * @returns {Slot} */
  static slotOf(pending, host) {
    if (!(pending instanceof PendingSolve) || pending.#host !== host) {
      throw new TypeError('run() takes a PendingSolve from this solver\'s start() or resume()');
    }
    return pending.#slot;
  }

  [INSPECT]() {
    return `PendingSolve { open: ${this.open} }`;
  }
}

class Solver {
  #key;
  #witConfig;
  #fetch;
  #clock;
  #host = new EngineHost();
  /** @type {ThreadBudget | null} */
  #budget = null;
  /** The plan's budget while its `threadsinfo` is in flight.
   * @type {Promise<ThreadBudget> | null} */
  #planBudget = null;
  /** Slots a run is driving (a solve is driven by one run at a time).
   * @type {WeakSet<Slot>} */
  #running = new WeakSet();

  /**
   * @param {string} apiKey the CaptchaAI key (kept inside; never in errors, snapshots or inspect output)
   * @param {Config} [config] `{baseUrl, requestTimeoutMs, deadlineMs, initialWaitMs, pollIntervalMs,
   *   maxSubmitRetries, maxPollErrors, unsolvableRetries, jitterSeed, maxJitterMs, pollCostMs}`
   * @param {SolverOptions} [options] `{fetch, threads, timeScale, solveTimes}`: a fetch implementation
   *   (default globalThis.fetch), at most `threads` solves in flight at once (default: the plan's
   *   threads, read with one `threadsinfo` request before the first solve), a clock running
   *   `timeScale` times faster than real time (0.01 to 10000; tests against the emulator only),
   *   and saved solve-times models; an unknown option is a TypeError
   */
  constructor(apiKey, config = {}, options = {}) {
    if (typeof apiKey !== 'string') throw new TypeError('apiKey must be a string');
    if (options === null || typeof options !== 'object') throw new TypeError('options must be an object');
    checkKeys(options, SOLVER_OPTIONS, 'solver option');
    const { fetch = globalThis.fetch, threads, timeScale = 1, solveTimes } = options;
    if (typeof fetch !== 'function') throw new TypeError('options.fetch must be a fetch function');
    this.#key = apiKey;
    this.#witConfig = toWitConfig(config);
    this.#fetch = fetch;
    this.#clock = new Clock(timeScale);
    // The engine checks the key and config now (building a request sends nothing).
    const checked = this.#host.account((root) => engineResult(() => root.account.balanceRequest(this.#key, this.#witConfig)));
    if (checked.err) throw errorFromFailure(checked.err);
    if (threads !== undefined && threads !== null) this.#budget = new ThreadBudget(threads);
    if (solveTimes !== undefined && solveTimes !== null) {
      if (typeof solveTimes !== 'object') throw new TypeError('options.solveTimes must be what solveTimes() returned');
      this.#host.loadSolveTimes(solveTimes);
    }
  }

  /**
   * Solves `task` (`{type, ...fields}`) to the end: the Solution, or a CaptchaAIError subclass.
   * The solve is created once the thread budget admits it, so its deadline does not run while it
   * waits for a thread (a task the engine refuses fails at once, before any wait).
   * @param {Task | string} task
   * @param {RunOptions} [options]
   * @returns {Promise<Solution>}
   */
  async solve(task, options = {}) {
    const checked = runOptions(options);
    this.start(task).close();
    const budget = await this.#threadBudget();
    const ticket = await budget.enter(checked.signal);
    try {
      return await this.#drive(this.start(task), checked, false);
    } finally {
      budget.leave(ticket);
    }
  }

  /**
   * The thread budget: `threads`', else the plan's threads, read with one `threadsinfo` request
   * the first time (every solve waiting for it shares it; a failed one fails those solves before
   * anything is sent, and the next solve asks again).
   * @returns {Promise<ThreadBudget>}
   */
  async #threadBudget() {
    if (this.#budget) return this.#budget;
    this.#planBudget ??= this.threadsInfo().then(
      (info) => (this.#budget = new ThreadBudget(info.threads)),
      (error) => {
        this.#planBudget = null;
        throw error;
      },
    );
    return this.#planBudget;
  }

  /** Validates `task` in the engine and creates its solve; nothing is sent until `run`.
   * @param {Task | string} task
   * @returns {PendingSolve} */
  start(task) {
    const json = toTaskJson(task);
    const type = task !== null && typeof task === 'object' ? (typeof task.type === 'string' ? task.type : null) : typeOf(json);
    const slot = this.#host.create(json, this.#key, this.#witConfig, BigInt(this.#clock.nowMs()), type);
    return new PendingSolve(this.#host, slot);
  }

  /** Continues a solve from a snapshot (taken by `pending.snapshot()` or `onCheckpoint`).
   * @param {string} snapshot
   * @returns {PendingSolve} */
  resume(snapshot) {
    if (typeof snapshot !== 'string') throw new TypeError('a snapshot is the string snapshot() returned');
    return new PendingSolve(this.#host, this.#host.restore(snapshot, this.#key));
  }

  /**
   * Drives `pending` to its end under the thread budget. `onCheckpoint(snapshot)` is awaited after
   * each result that leaves the solve in flight; resuming its latest snapshot continues the solve.
   * `signal` aborts the run (the solve is closed; resume from the last checkpoint).
   * @param {PendingSolve} pending
   * @param {RunOptions} [options]
   * @returns {Promise<Solution>}
   */
  async run(pending, options = {}) {
    return this.#drive(pending, runOptions(options), true);
  }

  /**
   * Drives `pending` to its end, first taking a thread of the budget if `takeThread` (else the
   * caller holds one); closes it when done, also when stopped while it waits for the thread.
   * @param {PendingSolve} pending
   * @param {RunOptions} options
   * @param {boolean} takeThread
   * @returns {Promise<Solution>}
   */
  async #drive(pending, { onCheckpoint, signal }, takeThread) {
    const slot = PendingSolve.slotOf(pending, this.#host);
    if (!this.#host.isOpen(slot)) throw new SolveClosedError();
    if (this.#running.has(slot)) throw new Error('this solve is already being run');
    this.#running.add(slot);
    const host = this.#host;
    const clock = this.#clock;
    let budget = null;
    let ticket = null;
    try {
      if (takeThread) {
        budget = await this.#threadBudget();
        ticket = await budget.enter(signal);
      }
      /** @type {import('./host.cjs').RawOutput} */
      let output;
      try {
        output = host.pollOutput(slot, BigInt(clock.nowMs()));
      } catch (error) {
        if (!(error instanceof EngineMisuseError) || error.kind !== 'time_went_backwards') throw error;
        // A resumed solve was given a later time by another clock: wait until then.
        await clock.sleepUntil(Number(error.value), signal);
        output = host.pollOutput(slot, BigInt(clock.nowMs()));
      }
      for (;;) {
        if (output.tag === 'solved') {
          host.observe(slot, output.val);
          return new Solution(output.val, host);
        }
        if (output.tag === 'failed') throw errorFromFailure(output.val);
        /** @type {{id: bigint, at: bigint, url: string, contentType: string,
         *   body: {tag: string, val: string | Uint8Array}, timeoutMs: bigint}} jco's raw `http-request` */
        const request = output.val;
        await clock.sleepUntil(Number(request.at), signal);
        const reply = await send(this.#fetch, clock, request, signal);
        const now = BigInt(clock.nowMs());
        output =
          reply.tag === 'ok'
            ? host.handleResponse(slot, now, request.id, reply.val)
            : host.handleTransportError(slot, now, request.id, reply.val);
        if (output.tag === 'send') {
          host.checkpoint(slot);
          if (onCheckpoint) await onCheckpoint(host.snapshot(slot));
        }
      }
    } finally {
      this.#running.delete(slot);
      host.drop(slot);
      if (budget !== null && ticket !== null) budget.leave(ticket);
    }
  }

  /** The plan's threads: `{threads, workingThreads, free}`.
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<ThreadsInfo>} */
  async threadsInfo({ signal } = {}) {
    const info = await this.#account('threadsInfoRequest', 'parseThreadsInfo', signal);
    return { threads: Number(info.threads), workingThreads: Number(info.workingThreads), free: Number(info.free) };
  }

  /** The account balance.
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<number>} */
  async balance({ signal } = {}) {
    return this.#account('balanceRequest', 'parseBalance', signal);
  }

  /** The learned solve-times models (adaptive polling), by captcha type, as text (no key or
   * token): give them to a later solver as `options.solveTimes` to continue learning.
   * @returns {Record<string, string>} */
  solveTimes() {
    return this.#host.solveTimes();
  }

  /** The first wait (ms) each model gives a new solve of its type at the default poll cost; null
   * while its table applies (under `minObservations()` solves of the type). */
  firstWaits() {
    return this.#host.firstWaits();
  }

  /** Observations a solve-times model needs before it changes anything (the engine's
   * `solve-times.min-observations`): under this many, solves of its type keep the type's table.
   * @returns {number} */
  minObservations() {
    return this.#host.minObservations();
  }

  /** `{capacity, running, queued}` of the thread budget; null until the plan's threads are read.
   * @returns {{capacity: number, running: number, queued: number} | null} */
  budget() {
    return this.#budget?.stats() ?? null;
  }

  /**
   * An account call: the engine builds the request and reads the reply.
   * @param {string} build the WIT function that builds the request
   * @param {string} parse the WIT function that reads the reply
   * @param {AbortSignal} [signal]
   * @returns {Promise<any>} the WIT result (jco's raw value)
   */
  async #account(build, parse, signal) {
    const host = this.#host;
    const built = host.account((root) => engineResult(() => root.account[build](this.#key, this.#witConfig)));
    if (built.err) throw errorFromFailure(built.err);
    const request = built.ok;
    await this.#clock.sleepUntil(Number(request.at), signal);
    const reply = await send(this.#fetch, this.#clock, request, signal);
    const parsed = host.account((root) => engineResult(() => root.account[parse](reply)));
    if (parsed.err) throw errorFromFailure(parsed.err);
    return parsed.ok;
  }

  [INSPECT]() {
    return `Solver { budget: ${JSON.stringify(this.budget())} }`;
  }

  toJSON() {
    return { solver: 'captchaai-engine', budget: this.budget() };
  }
}

module.exports = { Solver, PendingSolve };
