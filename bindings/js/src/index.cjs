'use strict';
// captchaai-engine: CaptchaAI solving on the captchaai:engine WebAssembly component. The package
// itself is CommonJS (`require`); index.mjs re-exports these same objects for `import`, so a
// process that does both shares one engine and one set of error classes.
const { Solver, PendingSolve } = require('./solver.cjs');
const { Solution } = require('./convert.cjs');
const {
  CaptchaAIError,
  PermanentError,
  TransientError,
  UnsolvableError,
  SnapshotError,
  SolveTimesError,
  SolveClosedError,
  EngineMisuseError,
} = require('./errors.cjs');

module.exports = {
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
};
