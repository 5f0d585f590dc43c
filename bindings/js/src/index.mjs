// captchaai-engine for `import`: the CommonJS package (index.cjs) re-exported, not a second copy,
// so `instanceof PermanentError` holds whichever way a module loaded it.
import pkg from './index.cjs';

export const {
  Solver,
  PendingSolve,
  Solution,
  CaptchaAIError,
  PermanentError,
  TransientError,
  UnsolvableError,
  SnapshotError,
  SolveTimesError,
  SolveClosedError,
  EngineMisuseError,
} = pkg;
