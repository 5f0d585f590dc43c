'use strict';
// One engine instance and the solves inside it, with trap recovery: a solve's state only changes
// when a result is fed back, so the host keeps its snapshot base once and its state after each
// result; if a call traps, the instance is replaced, every solve restored from its checkpoint, and
// the call retried once (as the Rust driver does). jco 1.12 does not poison a trapped instance,
// so the host treats every trap as fatal for that instance itself.
const { engineResult, instantiateComponent, isEngineResultError } = require('./engine.cjs');
const { errorFromFailure, errorFromMisuse, errorFromRestore } = require('./errors.cjs');

/** A solve inside a host: its handle in the current instance and what restores it. */
class Slot {
  handle;
  base;
  state;
  key;
  constructor(handle, key) {
    this.handle = handle;
    this.key = key;
  }
}

class EngineHost {
  #instantiate;
  #root;
  /** @type {Set<Slot>} */
  #slots = new Set();
  /** Instances replaced after a trap. */
  recoveries = 0;

  /** @param instantiate makes a fresh component instance (replaceable for recovery tests) */
  constructor(instantiate = instantiateComponent) {
    this.#instantiate = instantiate;
    this.#root = instantiate();
  }

  /** Creates a solve; returns its slot or throws the engine's failure as a typed error. */
  create(taskJson, key, witConfig, now) {
    const created = this.#call(() => engineResult(() => this.#root.engine.Solve.create(taskJson, key, witConfig, now)));
    if (created.err) throw errorFromFailure(created.err);
    return this.#adopt(created.ok, key);
  }

  /** Restores a whole snapshot; returns its slot or throws a SnapshotError. */
  restore(snapshot, key) {
    const restored = this.#call(() => engineResult(() => this.#root.engine.Solve.restore(snapshot, key)));
    if (restored.err) throw errorFromRestore(restored.err);
    return this.#adopt(restored.ok, key);
  }

  #adopt(handle, key) {
    const slot = new Slot(handle, key);
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

  /** The next output at `now` (`{tag: 'send'|'solved'|'failed', val}`). */
  pollOutput(slot, now) {
    return this.#output(slot, () => slot.handle.pollOutput(now));
  }

  /** Feeds a reply `{status, body}` to request `id`; returns the next output. */
  handleResponse(slot, now, id, response) {
    return this.#output(slot, () => slot.handle.handleResponse(now, id, response));
  }

  /** Reports transport error `kind` (`timeout`, `connect`, `broken`) for request `id`. */
  handleTransportError(slot, now, id, kind) {
    return this.#output(slot, () => slot.handle.handleTransportError(now, id, kind));
  }

  #output(slot, call) {
    const output = this.#call(() => engineResult(() => (this.#live(slot), call())));
    if (output.err) throw errorFromMisuse(output.err);
    return output.ok;
  }

  /** Keeps the solve's latest state for recovery. */
  checkpoint(slot) {
    slot.state = this.#call(() => (this.#live(slot), slot.handle.snapshotState()));
  }

  /** The whole snapshot (no key). */
  snapshot(slot) {
    return this.#call(() => (this.#live(slot), slot.handle.snapshot()));
  }

  taskId(slot) {
    return this.#call(() => (this.#live(slot), slot.handle.taskId())) ?? null;
  }

  deadline(slot) {
    const deadline = this.#call(() => (this.#live(slot), slot.handle.deadline()));
    return deadline === undefined ? null : Number(deadline);
  }

  isOpen(slot) {
    return this.#slots.has(slot);
  }

  /** Frees the solve; later calls on it throw. */
  drop(slot) {
    if (this.#slots.delete(slot)) this.#dispose(slot.handle);
  }

  /** Account calls and `is-fresh`/`solution-json`: `fn(root)` on the live instance. */
  account(fn) {
    return this.#call(() => fn(this.#root));
  }

  isFresh(rawSolution, now, maxAgeMs) {
    return this.#call(() => this.#root.engine.isFresh(rawSolution, now, maxAgeMs));
  }

  solutionJson(rawSolution) {
    return this.#call(() => this.#root.engine.solutionJson(rawSolution));
  }

  #live(slot) {
    if (!this.#slots.has(slot)) throw new Error('this solve has finished or was closed');
  }

  #dispose(handle) {
    try {
      handle[Symbol.dispose]();
    } catch {
      // A handle of a replaced instance is gone with it.
    }
  }

  /** Runs `call`; on a trap, replaces the instance (restoring every solve) and runs it once more. */
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

module.exports = { EngineHost };
