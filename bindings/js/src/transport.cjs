'use strict';
// Moving bytes and time: a clock the engine's times are read from and slept on, and an HTTP
// sender that posts a request exactly as the engine gave it and returns what came back as the
// WIT `reply` (`{tag: 'ok', val: {status, body}}` or `{tag: 'err', val: transport error}`).

/** The clock's scale range: the CLI's `--time-scale` and the emulator's. */
const MIN_SCALE = 0.01;
const MAX_SCALE = 10_000;

/** Epoch milliseconds from a monotonic source, optionally running `scale` times faster. */
class Clock {
  #startMs;
  #startPerf;
  #scale;

  constructor(scale = 1) {
    if (typeof scale !== 'number' || Number.isNaN(scale)) {
      throw new TypeError(`timeScale must be a number (got ${String(scale)})`);
    }
    if (!(scale >= MIN_SCALE && scale <= MAX_SCALE)) {
      throw new RangeError(`timeScale must be from ${MIN_SCALE} to ${MAX_SCALE} (got ${scale})`);
    }
    this.#scale = scale;
    this.#startPerf = performance.now();
    this.#startMs = Math.floor(performance.timeOrigin + this.#startPerf);
  }

  /** The current time (epoch ms, never going backwards). */
  nowMs() {
    return this.#startMs + Math.floor((performance.now() - this.#startPerf) * this.#scale);
  }

  /** Real milliseconds for `virtualMs`.
   * @param {number} virtualMs */
  realMs(virtualMs) {
    return virtualMs / this.#scale;
  }

  /** Resolves once `nowMs() >= atMs` (rejects with the signal's reason if it aborts first).
   * @param {number} atMs
   * @param {AbortSignal} [signal] */
  async sleepUntil(atMs, signal) {
    for (;;) {
      signal?.throwIfAborted();
      const remaining = atMs - this.nowMs();
      if (remaining <= 0) return;
      await sleep(Math.max(1, Math.ceil(this.realMs(remaining))), signal);
    }
  }
}

/**
 * @param {number} ms
 * @param {AbortSignal} [signal]
 * @returns {Promise<void>}
 */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Socket errors meaning the request was never delivered (nothing can have been processed), by
 * `code` as Node's and Bun's fetch set it (Bun before 1.1 spelled a refused connection
 * `ConnectionRefused`).
 */
const NOT_DELIVERED = new Set([
  'ECONNREFUSED',
  'ConnectionRefused',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
]);

/**
 * Deno's fetch sets no code; its error says `client error (Connect)` (hyper's connector failing:
 * refused, DNS, TLS) when the request was never sent.
 */
const DENO_NOT_CONNECTED = /\bclient error \(Connect\)/;

/** Reply bodies are decoded the WIT's way: invalid UTF-8 becomes U+FFFD and a BOM is kept. */
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });

/**
 * Sends `request` (a WIT `http-request`) with `fetchFn` and returns the WIT `reply`. The request
 * is given up after its `timeoutMs` (on `clock`'s scale) as `timeout`; `signal` aborts the whole
 * exchange by rejecting with its reason (the solve is left waiting for this request).
 * @param {typeof globalThis.fetch} fetchFn
 * @param {Clock} clock
 * @param {{url: string, contentType: string, body: {tag: string, val: string | Uint8Array},
 *   timeoutMs: bigint}} request jco's raw `http-request`
 * @param {AbortSignal} [signal]
 * @returns {Promise<{tag: 'ok', val: {status: number, body: string}} | {tag: 'err', val: 'timeout' | 'connect' | 'broken'}>}
 */
async function send(fetchFn, clock, request, signal) {
  const timeout = AbortSignal.timeout(Math.max(1, Math.ceil(clock.realMs(Number(request.timeoutMs)))));
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  try {
    const response = await fetchFn(request.url, {
      method: 'POST', // the WIT: every request is a POST
      headers: { 'content-type': request.contentType },
      body: /** @type {BodyInit} */ (request.body.val), // form text or multipart bytes, as given
      redirect: 'manual', // the engine reads every status itself
      signal: combined,
    });
    const bytes = await response.arrayBuffer();
    return { tag: 'ok', val: { status: response.status, body: decoder.decode(bytes) } };
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (timeout.aborted) return { tag: 'err', val: 'timeout' };
    return { tag: 'err', val: notDelivered(error) ? 'connect' : 'broken' };
  }
}

/** @param {unknown} error */
function notDelivered(error) {
  /** @type {any} */
  let e = error;
  for (let depth = 0; e && depth < 5; e = e.cause, depth += 1) {
    if (NOT_DELIVERED.has(e.code) || e.syscall === 'connect' || e.syscall === 'getaddrinfo') return true;
    if (typeof e.message === 'string' && DENO_NOT_CONNECTED.test(e.message)) return true;
  }
  return false;
}

module.exports = { Clock, send };
