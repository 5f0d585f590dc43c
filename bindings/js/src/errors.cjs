'use strict';
// Errors a solve ends with. The subclass is chosen by the engine's failure class alone (never by
// reading codes); every field comes from the engine's failure record, which never holds the key.

/**
 * @typedef {'input' | 'service' | 'no_answer'} FailureOrigin
 * @typedef {{code: string, message: string, origin: FailureOrigin, taskId: string | null,
 *   field: string | null, retryAfter: number | null}} FailureFields
 */

/** A solve that ended without an answer (or was refused before anything was sent). */
class CaptchaAIError extends Error {
  /**
   * @param {FailureFields} failure the engine's failure, already converted by `errorFromFailure`
   */
  constructor({ code, message, origin, taskId, field, retryAfter }) {
    super(message);
    this.name = new.target.name;
    /** The failure's code as the engine reports it (CaptchaAI's or the engine's own; see its code table). */
    this.code = code;
    /** `'input'` (refused before sending), `'service'` (CaptchaAI said so) or `'no_answer'`. */
    this.origin = origin;
    /** The CaptchaAI task id, once one was assigned; else null. */
    this.taskId = taskId;
    /** The task or config field at fault (validation failures); else null. */
    this.field = field;
    /** Seconds after which retrying may help (the engine's hint); else null. */
    this.retryAfter = retryAfter;
  }
}

/** Fix the key, plan, account or task first; retrying unchanged cannot help. */
class PermanentError extends CaptchaAIError {}

/** Worth trying again later, after `retryAfter` seconds when given. */
class TransientError extends CaptchaAIError {}

/** The service gave up on the captcha; a fresh task may succeed. */
class UnsolvableError extends CaptchaAIError {}

/** A snapshot that cannot be resumed: `kind` is `malformed`, `truncated`, `foreign`,
 * `unsupported_version`, `invalid` or `invalid_key`. */
class SnapshotError extends Error {
  /**
   * @param {'malformed' | 'truncated' | 'foreign' | 'unsupported_version' | 'invalid' | 'invalid_key'} kind
   * @param {string} message
   */
  constructor(kind, message) {
    super(message);
    this.name = 'SnapshotError';
    this.kind = kind;
  }
}

/** A solve-times model (adaptive polling) that cannot be used: its text is refused, or it is saved
 * under another captcha type. `kind`: `malformed`, `foreign`, `unsupported_version`, `invalid`. */
class SolveTimesError extends Error {
  /**
   * @param {'malformed' | 'foreign' | 'unsupported_version' | 'invalid'} kind
   * @param {string} message
   */
  constructor(kind, message) {
    super(message);
    this.name = 'SolveTimesError';
    this.kind = kind;
  }
}

/** A call on a solve that has finished or was closed (`run` closes a solve when it ends): resume
 * its last snapshot to continue it. */
class SolveClosedError extends Error {
  constructor() {
    super('this solve has finished or was closed; resume its last snapshot to continue it');
    this.name = 'SolveClosedError';
  }
}

/**
 * The solve-times error the engine returned, as a SolveTimesError.
 * @param {{tag: string, val?: unknown}} error
 */
function errorFromSolveTimes(error) {
  const kind = /** @type {SolveTimesError['kind']} */ (error.tag.replaceAll('-', '_'));
  const detail = error.val === undefined ? '' : `: ${error.val}`;
  return new SolveTimesError(kind, `the solve times cannot be used (${kind}${detail})`);
}

/** The engine reported that this host broke the driving contract (a bug in this package). */
class EngineMisuseError extends Error {
  /**
   * @param {'time_went_backwards' | 'unknown_request' | 'stale_response' | 'not_due'} kind
   * @param {number} value
   */
  constructor(kind, value) {
    super(`the engine reported host misuse: ${kind} (${value}); this is a bug in captchaai-engine`);
    this.name = 'EngineMisuseError';
    this.kind = kind;
    /** The misuse's payload: a time (epoch ms) or a request id. */
    this.value = value;
  }
}

/** @type {Record<string, typeof PermanentError | undefined>} */
const CLASSES = {
  permanent: PermanentError,
  transient: TransientError,
  unsolvable: UnsolvableError,
};

/** @type {Record<string, FailureOrigin | undefined>} */
const ORIGINS = {
  input: 'input',
  service: 'service',
  'no-answer': 'no_answer',
};

/**
 * The typed error for a WIT `failure` record.
 * @param {{code: string, message: string, class: string, origin: string, taskId?: string,
 *   field?: string, retryAfterMs?: bigint}} failure
 */
function errorFromFailure(failure) {
  const ErrorClass = CLASSES[failure.class];
  const origin = ORIGINS[failure.origin];
  if (!ErrorClass || !origin) {
    // Only a component built from another WIT could do this.
    throw new TypeError(`unknown failure class or origin from the engine: ${failure.class}/${failure.origin}`);
  }
  return new ErrorClass({
    code: failure.code,
    message: failure.message,
    origin,
    taskId: failure.taskId ?? null,
    field: failure.field ?? null,
    retryAfter: failure.retryAfterMs === undefined ? null : Number(failure.retryAfterMs) / 1000,
  });
}

/** @type {Record<string, SnapshotError['kind'] | undefined>} */
const RESTORE_KINDS = {
  malformed: 'malformed',
  truncated: 'truncated',
  foreign: 'foreign',
  'unsupported-version': 'unsupported_version',
  invalid: 'invalid',
  'invalid-key': 'invalid_key',
};

/**
 * The typed error for a WIT `restore-error` variant.
 * @param {{tag: string, val?: unknown}} restoreError
 */
function errorFromRestore(restoreError) {
  const kind = RESTORE_KINDS[restoreError.tag] ?? /** @type {SnapshotError['kind']} */ (restoreError.tag);
  const detail = restoreError.val === undefined ? '' : `: ${restoreError.val}`;
  return new SnapshotError(kind, `the snapshot cannot be resumed (${kind}${detail})`);
}

/** @type {Record<string, EngineMisuseError['kind'] | undefined>} */
const MISUSE_KINDS = {
  'time-went-backwards': 'time_went_backwards',
  'unknown-request': 'unknown_request',
  'stale-response': 'stale_response',
  'not-due': 'not_due',
};

/**
 * The misuse kind as the transcripts spell it (`time_went_backwards`, ...).
 * @param {{tag: string, val: bigint}} misuse
 */
function misuseKind(misuse) {
  return MISUSE_KINDS[misuse.tag] ?? /** @type {EngineMisuseError['kind']} */ (misuse.tag);
}

/**
 * The error for a WIT `misuse` variant.
 * @param {{tag: string, val: bigint}} misuse
 */
function errorFromMisuse(misuse) {
  return new EngineMisuseError(misuseKind(misuse), Number(misuse.val));
}

module.exports = {
  CaptchaAIError,
  PermanentError,
  TransientError,
  UnsolvableError,
  SnapshotError,
  SolveTimesError,
  SolveClosedError,
  EngineMisuseError,
  errorFromFailure,
  errorFromSolveTimes,
  errorFromRestore,
  misuseKind,
  errorFromMisuse,
};
