// Types of captchaai-engine's typed layer, hand-written; the task types are generated from the
// engine's type table (tasks.d.ts, `cargo xtask ts-types`), and the raw WIT bindings jco emits
// never reach users. The engine validates every task and config and names the field at fault.
// The build copies this file to gen/index.d.cts, the declarations of the `require` entry.
//
// What they need from the compiler: `fetch` and `AbortSignal` (TypeScript's default libraries,
// which include the DOM's, or @types/node). `Symbol.dispose` is declared below, so they compile
// without `lib: esnext.disposable`; `using pending = ...` needs that lib (or @types/node) in the
// consumer's project, as any `using` does.
import type { Task } from './tasks.js';

export * from './tasks.js';

declare global {
  interface SymbolConstructor {
    /** ES2026's well-known symbol for explicit resource management (as lib.esnext.disposable and @types/node declare it). */
    readonly dispose: unique symbol;
  }
}

/** Solve settings; every field optional (the engine's default or the captcha type's value). */
export interface Config {
  /** Default `https://ocr.captchaai.com`. */
  baseUrl?: string;
  /** Per-request timeout, 1,000-120,000 ms; default 30,000. */
  requestTimeoutMs?: number | bigint;
  /** Overall deadline from the original submit, 10 s to 1 h; default per type. */
  deadlineMs?: number | bigint;
  /** Wait before the first poll, 1,000-300,000 ms; default per type. */
  initialWaitMs?: number | bigint;
  /** Wait between polls, 5,000-120,000 ms (never faster than every 5 s); default per type. */
  pollIntervalMs?: number | bigint;
  /** Submit retries after transient errors, 0-10; default 5. */
  maxSubmitRetries?: number;
  /** Consecutive failed polls before giving up, 1-100; default 10. */
  maxPollErrors?: number;
  /** Fresh resubmissions after the service reports a captcha unsolvable, 0-5; default 1. */
  unsolvableRetries?: number;
  /** Seed for wait jitter; none means no jitter. */
  jitterSeed?: number | bigint;
  /** Largest jitter per wait when seeded, 0-10,000 ms; default 1,000. */
  maxJitterMs?: number | bigint;
  /** What one poll is worth in ms of waiting, 0-60,000; default 250: solves created with a
   * learned solve-times model poll on the schedule of least expected wait from the answer being
   * ready to the poll that finds it, plus this per poll. */
  pollCostMs?: number | bigint;
}

export interface SolverOptions {
  /** The fetch used for every request (default `globalThis.fetch`). */
  fetch?: typeof globalThis.fetch;
  /**
   * At most this many solves in flight at once (the engine's thread gate; the others wait in
   * arrival order); default the plan's threads, read with one `threadsinfo` before the first solve.
   */
  threads?: number;
  /** Run the clock this many times faster than real time, 0.01 to 10000 (tests against the emulator only). */
  timeScale?: number;
  /** Solve-times models saved from `solver.solveTimes()`, to continue learning from. @throws SolveTimesError */
  solveTimes?: Record<string, string>;
}

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** A solved captcha. Times are Unix epoch milliseconds. */
export declare class Solution {
  private constructor();
  /** `'text'`: a token or text; `'json'`: a structured answer (GeeTest, Lemin, grid, BLS). */
  readonly answerType: 'text' | 'json';
  /** The token or text, or the structured answer as a parsed JSON value. */
  readonly answer: string | JsonValue;
  /** The solver's user agent where the type returns one; reuse it on the site. */
  readonly userAgent: string | null;
  /** The task id of the successful attempt (null for synchronous image answers). */
  readonly taskId: string | null;
  readonly submittedAt: number;
  /** When the answer arrived; token lifetimes count from here. */
  readonly solvedAt: number;
  readonly elapsedMs: number;
  /** Polls sent, over all attempts. */
  readonly polls: number;
  /** Tasks submitted: 1 plus fresh resubmissions after an unsolvable answer. */
  readonly attempts: number;
  /** When the token stops being usable, where the type's lifetime is known. */
  readonly expiresAt: number | null;
  /** Whether the answer may still be used at `now`: no older than `maxAgeMs`, not expired. */
  isFresh(maxAgeMs: number | bigint, now?: number | bigint): boolean;
  /** The engine's client JSON: `{answer, user_agent, task_id, submitted_at, solved_at, elapsed_ms, polls, attempts, expires_at}`. */
  toJSON(): { [key: string]: JsonValue };
}

export type FailureOrigin = 'input' | 'service' | 'no_answer';

/** The fields of an engine failure, as the package builds its errors from them. */
export interface FailureFields {
  code: string;
  message: string;
  origin: FailureOrigin;
  taskId: string | null;
  field: string | null;
  retryAfter: number | null;
}

/** A solve that ended without an answer, or was refused before anything was sent. */
export declare class CaptchaAIError extends Error {
  /** Built by the package from the engine's failure record (the subclass is its failure class). */
  constructor(failure: FailureFields);
  /** The failure's code as the engine reports it (CaptchaAI's or the engine's own; see its code table). */
  readonly code: string;
  /** `input`: refused before sending (fix the task); `service`: CaptchaAI's answer; `no_answer`: transport, unreadable replies, deadline. */
  readonly origin: FailureOrigin;
  /** The CaptchaAI task id, once one was assigned. */
  readonly taskId: string | null;
  /** The task or config field at fault, for validation failures. */
  readonly field: string | null;
  /** Seconds after which retrying may help, when the engine gives a hint. */
  readonly retryAfter: number | null;
}
/** Fix the key, plan, account or task first; retrying unchanged cannot help. */
export declare class PermanentError extends CaptchaAIError {}
/** Worth trying again later (after `retryAfter` seconds when given). */
export declare class TransientError extends CaptchaAIError {}
/** The service gave up on the captcha; a fresh task may succeed. */
export declare class UnsolvableError extends CaptchaAIError {}

/** A snapshot that cannot be resumed. */
export declare class SnapshotError extends Error {
  constructor(kind: SnapshotError['kind'], message: string);
  readonly kind: 'malformed' | 'truncated' | 'foreign' | 'unsupported_version' | 'invalid' | 'invalid_key';
}

/** A solve-times model that cannot be used (adaptive polling). */
export declare class SolveTimesError extends Error {
  constructor(kind: SolveTimesError['kind'], message: string);
  readonly kind: 'malformed' | 'foreign' | 'unsupported_version' | 'invalid';
}

/** The engine reported that this package broke the driving contract (a bug here). */
export declare class EngineMisuseError extends Error {
  constructor(kind: EngineMisuseError['kind'], value: number);
  readonly kind: 'time_went_backwards' | 'unknown_request' | 'stale_response' | 'not_due';
  /** The misuse's payload: a time (epoch ms) or a request id. */
  readonly value: number;
}

/** A call on a solve that has finished or was closed: resume its last snapshot to continue it. */
export declare class SolveClosedError extends Error {
  constructor();
}

/** A solve created in the engine and not finished yet. */
export declare class PendingSolve {
  private constructor();
  /** The whole in-flight state as versioned JSON, without the key (it does hold the task). @throws SolveClosedError */
  snapshot(): string;
  /** The CaptchaAI task id, once a submit was accepted. @throws SolveClosedError */
  readonly taskId: string | null;
  /** When the deadline passes (epoch ms). @throws SolveClosedError */
  readonly deadline: number | null;
  /** Whether the solve can still run. */
  readonly open: boolean;
  /** Frees the solve in the engine (`run` does this when it ends). */
  close(): void;
  [Symbol.dispose](): void;
}

export interface RunOptions {
  /** Awaited after each result that leaves the solve in flight; `resume(snapshot)` continues from it. */
  onCheckpoint?: (snapshot: string) => void | Promise<void>;
  /** Stops the run (rejecting with the signal's reason); the solve is closed. */
  signal?: AbortSignal;
}

export interface ThreadsInfo {
  /** The plan's thread cap. */
  threads: number;
  /** Threads busy right now (by any client of the key). */
  workingThreads: number;
  /** `threads - workingThreads`, never negative. */
  free: number;
}

/** Drives solves with fetch; every decision is the engine's. */
export declare class Solver {
  /**
   * @param apiKey the CaptchaAI key (checked by the engine now; never in errors, snapshots or inspect output)
   * @throws PermanentError for a malformed key; TypeError for values of the wrong type or an
   * unknown option; RangeError for a timeScale out of range
   */
  constructor(apiKey: string, config?: Config, options?: SolverOptions);
  /**
   * Solves a task to the end, creating its solve once the thread budget admits it (the deadline
   * does not run while it waits). @throws CaptchaAIError (a subclass per failure class)
   */
  solve(task: Task | string, options?: RunOptions): Promise<Solution>;
  /** Validates the task in the engine and creates its solve; nothing is sent. @throws PermanentError */
  start(task: Task | string): PendingSolve;
  /** Continues a solve from a snapshot. @throws SnapshotError */
  resume(snapshot: string): PendingSolve;
  /**
   * Drives a pending solve to its end under the thread budget; closes it when done. Its deadline
   * has run since `start()`. @throws TypeError for bad options, before anything is sent
   */
  run(pending: PendingSolve, options?: RunOptions): Promise<Solution>;
  /** The plan's threads. */
  threadsInfo(options?: { signal?: AbortSignal }): Promise<ThreadsInfo>;
  /** The account balance. */
  balance(options?: { signal?: AbortSignal }): Promise<number>;
  /** The thread budget's state; null until the plan's threads are read (without `threads`). */
  budget(): { capacity: number; running: number; queued: number } | null;
  /** The learned solve-times models by captcha type, as text (no key or token): give them to a
   * later solver as `options.solveTimes`. */
  solveTimes(): Record<string, string>;
  /** The first wait (ms) each model gives a new solve of its type at the default poll cost; null
   * while its table applies (under `minObservations()` solves of the type). */
  firstWaits(): Record<string, number | null>;
  /** Observations a solve-times model needs before it changes anything (the engine's
   * `solve-times.min-observations`): under this many, solves of its type keep the type's table. */
  minObservations(): number;
}
