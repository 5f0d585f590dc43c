'use strict';
// The thread budget: the engine's `thread-gate` (in its own small instance) decides who may start;
// this only waits for its decisions.
const { engineResult, instantiateComponent } = require('./engine.cjs');
const { errorFromFailure } = require('./errors.cjs');
const { toU64 } = require('./convert.cjs');

class ThreadBudget {
  #gate;
  /** Tickets waiting for admission: ticket → resolve.
   * @type {Map<bigint, () => void>} */
  #waiting = new Map();

  /** At most `threads` solves in flight at once; throws the engine's failure if it refuses.
   * @param {number | bigint} threads */
  constructor(threads) {
    const planThreads = toU64(threads, 'threads');
    const created = engineResult(() => instantiateComponent().account.ThreadGate.create(planThreads, 0n));
    if (created.err) throw errorFromFailure(created.err);
    this.#gate = created.ok;
  }

  /**
   * Resolves with a ticket once the engine admits it; give the ticket to `leave`.
   * @param {AbortSignal} [signal]
   * @returns {Promise<bigint>}
   */
  async enter(signal) {
    signal?.throwIfAborted();
    const [ticket, admission] = this.#gate.enter();
    if (admission.tag === 'admitted') return ticket;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.#waiting.delete(ticket);
        this.leave(ticket); // withdraws the queued ticket
        reject(signal?.reason);
      };
      this.#waiting.set(ticket, () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(ticket);
      });
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Ends an admitted solve (or withdraws a waiting one) and wakes those it admits.
   * @param {bigint} ticket */
  leave(ticket) {
    const admitted = this.#gate.leave(ticket) ?? [];
    for (const next of admitted) {
      const wake = this.#waiting.get(next);
      this.#waiting.delete(next);
      wake?.();
    }
  }

  /** `{capacity, running, queued}` as the engine counts them. */
  stats() {
    return {
      capacity: Number(this.#gate.capacity()),
      running: Number(this.#gate.running()),
      queued: Number(this.#gate.queued()),
    };
  }
}

module.exports = { ThreadBudget };
