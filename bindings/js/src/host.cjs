'use strict';
// One engine instance and the solves inside it, with trap recovery: a solve's state only changes
// when a result is fed back, so the host keeps its snapshot base once and its state after each
// result; if a call traps, the instance is replaced, every solve restored from its checkpoint, and
// the call retried once (as the Rust driver does). jco 1.12 does not poison a trapped instance,
// so the host treats every trap as fatal for that instance itself.
const { engineResult, instantiateComponent, isEngineResultError } = require('./engine.cjs');
const {
  errorFromFailure,
  errorFromMisuse,
  errorFromRestore,
  errorFromSolveTimes,
  SolveClosedError,
  SolveTimesError,
} = require('./errors.cjs');

/**
 * A WIT output of a solve (jco's raw value): `{tag: 'send' | 'solved' | 'failed', val}`.
 * @typedef {{tag: 'send', val: any} | {tag: 'solved', val: any} | {tag: 'failed', val: any}} RawOutput
 */

/** A solve inside a host: its handle in the current instance and what restores it. */
class Slot {
  /** @type {any} jco's `solve` resource in the current instance */
  handle;
  /** @type {string} */
  base = '';
  /** @type {string} */
  state = '';
  /** @type {string} */
  key;
  /** The captcha type (null if unknown), whose model learns from the solve. @type {string | null} */
  type;
  /**
   * @param {any} handle
   * @param {string} key
   * @param {string | null} type
   */
  constructor(handle, key, type) {
    this.handle = handle;
    this.key = key;
    this.type = type;
  }
}

class EngineHost {
  #instantiate;
  #root;
  /** @type {Set<Slot>} */
  #slots = new Set();
  /** Solve-times models by captcha type: `{handle, root}` (the instance holding it).
   * @type {Map<string, {handle: any, root: import('./engine.cjs').EngineRoot}>} */
  #times = new Map();
  /** The texts a replacement instance's models continue from (given, or saved by solveTimes()).
   * @type {Map<string, string>} */
  #timesSaved = new Map();
  /** Instances replaced after a trap. */
  recoveries = 0;

  /** @param {() => import('./engine.cjs').EngineRoot} instantiate makes a fresh component
   * instance (replaceable for recovery tests) */
  constructor(instantiate = instantiateComponent) {
    this.#instantiate = instantiate;
    this.#root = instantiate();
  }

  /**
   * Creates a solve of captcha type `type` (null if unknown) with that type's model; returns
   * its slot or throws the engine's failure as a typed error.
   * @param {string} taskJson
   * @param {string} key
   * @param {Record<string, unknown>} witConfig
   * @param {bigint} now
   * @param {string | null} type
   */
  create(taskJson, key, witConfig, now, type) {
    const created = this.#call(() => {
      const times = this.#model(type);
      const { Solve } = this.#root.engine;
      return engineResult(() =>
        times ? Solve.createWithTimes(taskJson, key, witConfig, now, times) : Solve.create(taskJson, key, witConfig, now),
      );
    });
    if (created.err) throw errorFromFailure(created.err);
    return this.#adopt(created.ok, key, type);
  }

  /** Restores a whole snapshot; returns its slot or throws a SnapshotError.
   * @param {string} snapshot
   * @param {string} key */
  restore(snapshot, key) {
    const restored = this.#call(() => engineResult(() => this.#root.engine.Solve.restore(snapshot, key)));
    if (restored.err) throw errorFromRestore(restored.err);
    return this.#adopt(restored.ok, key, this.#call(() => restored.ok.taskType()));
  }

  /** Adds saved models (`{type: text}`); throws SolveTimesError for one that is refused.
   * @param {Record<string, unknown>} saved */
  loadSolveTimes(saved) {
    for (const [type, text] of Object.entries(saved)) {
      if (typeof text !== 'string') throw new TypeError(`solveTimes.${type} must be the string solveTimes() gave`);
      const read = this.#call(() => engineResult(() => this.#root.engine.SolveTimes.fromText(text)));
      if (read.err) throw errorFromSolveTimes(read.err);
      const actual = read.ok.taskType();
      if (actual !== type) {
        throw new SolveTimesError('invalid', `solveTimes.${type} is a model of ${actual}`);
      }
      this.#times.set(type, { handle: read.ok, root: this.#root });
      this.#timesSaved.set(type, text);
    }
  }

  /** The model of `type` in the live instance (made on first use, or from its saved text after
   * a trap); null for no or an unknown type (the engine refuses such a task itself).
   * @param {string | null} type
   * @returns {any} */
  #model(type) {
    if (typeof type !== 'string') return null;
    const live = this.#times.get(type);
    if (live && live.root === this.#root) return live.handle;
    const saved = this.#timesSaved.get(type);
    const { SolveTimes } = this.#root.engine;
    const made = engineResult(() => (saved === undefined ? SolveTimes.create(type) : SolveTimes.fromText(saved)));
    if (made.err) return null;
    this.#times.set(type, { handle: made.ok, root: this.#root });
    return made.ok;
  }

  /** Lets the slot's type's model learn from its solution (a trap costs only this observation).
   * @param {Slot} slot
   * @param {any} rawSolution */
  observe(slot, rawSolution) {
    try {
      this.#call(() => this.#model(slot.type)?.observe(rawSolution));
    } catch (error) {
      if (!(error instanceof WebAssembly.RuntimeError || error instanceof RangeError)) throw error;
    }
  }

  /** Every live model's text form, by type (also what a replacement instance continues from).
   * @returns {Record<string, string>} */
  solveTimes() {
    this.#call(() => {
      for (const [type, { handle, root }] of this.#times) {
        if (root === this.#root) this.#timesSaved.set(type, handle.toText());
      }
    });
    return Object.fromEntries(this.#timesSaved);
  }

  /** The engine's threshold of observations under which a model changes nothing.
   * @returns {number} */
  minObservations() {
    return this.#call(() => Number(this.#root.engine.SolveTimes.minObservations()));
  }

  /** The first wait each model gives (ms), or null while its type's table applies.
   * @returns {Record<string, number | null>} */
  firstWaits() {
    return this.#call(() =>
      Object.fromEntries(
        [...this.#times.keys()].map((type) => {
          const wait = this.#model(type)?.firstWaitMs();
          return [type, wait === undefined ? null : Number(wait)];
        }),
      ),
    );
  }

  /**
   * @param {any} handle
   * @param {string} key
   * @param {string | null} type
   */
  #adopt(handle, key, type = null) {
    const slot = new Slot(handle, key, type);
    try {
      slot.base = this.#call(() => slot.handle.snapshotBase());
      slot.state = this.#call(() => slot.handle.snapshotState());
    } catch (error) {
      this.#dispose(handle);
      throw error;
    }
    this.#slots.add(slot);
    return slot;
  }

  /** The next output at `now` (`{tag: 'send'|'solved'|'failed', val}`).
   * @param {Slot} slot
   * @param {bigint} now */
  pollOutput(slot, now) {
    return this.#output(slot, () => slot.handle.pollOutput(now));
  }

  /** Feeds a reply `{status, body}` to request `id`; returns the next output.
   * @param {Slot} slot
   * @param {bigint} now
   * @param {bigint} id
   * @param {{status: number, body: string}} response */
  handleResponse(slot, now, id, response) {
    return this.#output(slot, () => slot.handle.handleResponse(now, id, response));
  }

  /** Reports transport error `kind` (`timeout`, `connect`, `broken`) for request `id`.
   * @param {Slot} slot
   * @param {bigint} now
   * @param {bigint} id
   * @param {'timeout' | 'connect' | 'broken'} kind */
  handleTransportError(slot, now, id, kind) {
    return this.#output(slot, () => slot.handle.handleTransportError(now, id, kind));
  }

  /**
   * @param {Slot} slot
   * @param {() => RawOutput} call
   * @returns {RawOutput}
   */
  #output(slot, call) {
    const output = this.#call(() => engineResult(() => (this.#live(slot), call())));
    if (output.err) throw errorFromMisuse(output.err);
    return /** @type {RawOutput} */ (output.ok);
  }

  /** Keeps the solve's latest state for recovery.
   * @param {Slot} slot */
  checkpoint(slot) {
    slot.state = this.#call(() => (this.#live(slot), slot.handle.snapshotState()));
  }

  /** The whole snapshot (no key).
   * @param {Slot} slot
   * @returns {string} */
  snapshot(slot) {
    return this.#call(() => (this.#live(slot), slot.handle.snapshot()));
  }

  /** @param {Slot} slot
   * @returns {string | null} */
  taskId(slot) {
    return this.#call(() => (this.#live(slot), slot.handle.taskId())) ?? null;
  }

  /** @param {Slot} slot
   * @returns {number | null} */
  deadline(slot) {
    const deadline = this.#call(() => (this.#live(slot), slot.handle.deadline()));
    return deadline === undefined ? null : Number(deadline);
  }

  /** @param {Slot} slot */
  isOpen(slot) {
    return this.#slots.has(slot);
  }

  /** Frees the solve; later calls on it throw.
   * @param {Slot} slot */
  drop(slot) {
    if (this.#slots.delete(slot)) this.#dispose(slot.handle);
  }

  /** Account calls and `is-fresh`/`solution-json`: `fn(root)` on the live instance.
   * @template T
   * @param {(root: import('./engine.cjs').EngineRoot) => T} fn
   * @returns {T} */
  account(fn) {
    return this.#call(() => fn(this.#root));
  }

  /** @param {any} rawSolution
   * @param {bigint} now
   * @param {bigint} maxAgeMs
   * @returns {boolean} */
  isFresh(rawSolution, now, maxAgeMs) {
    return this.#call(() => this.#root.engine.isFresh(rawSolution, now, maxAgeMs));
  }

  /** @param {any} rawSolution
   * @returns {string} */
  solutionJson(rawSolution) {
    return this.#call(() => this.#root.engine.solutionJson(rawSolution));
  }

  /** @param {Slot} slot */
  #live(slot) {
    if (!this.#slots.has(slot)) throw new SolveClosedError();
  }

  /** @param {any} handle */
  #dispose(handle) {
    try {
      handle[Symbol.dispose]();
    } catch {
      // A handle of a replaced instance is gone with it.
    }
  }

  /** Runs `call`; on a trap, replaces the instance (restoring every solve) and runs it once more.
   * @template T
   * @param {() => T} call
   * @returns {T} */
  #call(call) {
    try {
      return call();
    } catch (error) {
      if (isEngineResultError(error) || !(error instanceof WebAssembly.RuntimeError || error instanceof RangeError)) {
        throw error;
      }
      this.#recover(error);
      return call();
    }
  }

  /** @param {Error} trap */
  #recover(trap) {
    this.recoveries += 1;
    const root = this.#instantiate();
    for (const slot of this.#slots) {
      const restored = engineResult(() => root.engine.Solve.restoreParts(slot.base, slot.state, slot.key));
      if (restored.err) {
        throw new Error(`recovering from a trap (${trap.message}): restoring a solve failed`, {
          cause: errorFromRestore(restored.err),
        });
      }
      slot.handle = restored.ok;
    }
    this.#root = root;
  }
}

module.exports = { EngineHost, Slot };
