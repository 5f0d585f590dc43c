// captchaai-engine: CaptchaAI solving on the captchaai:engine WebAssembly component.
export { Solver, PendingSolve } from './solver.js';
export { Solution } from './convert.js';
export {
  CaptchaAIError,
  PermanentError,
  TransientError,
  UnsolvableError,
  SnapshotError,
  EngineMisuseError,
} from './errors.js';
