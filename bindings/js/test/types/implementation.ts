// Compiled by tsconfig.check.json (test/types.test.mjs) with the package's sources, whose JSDoc
// types the same compiler checks (checkJs): the hand-written
// declarations (src/index.d.ts) are what the implementation is. Each assignment below fails to
// compile when a declared export is missing, or when the implementation accepts less, or returns
// other types, than its declaration says.
import type * as Declared from '../../src/index.js';
import * as Implementation from '../../src/index.cjs';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Holds<T extends true> = T;

// The package exports exactly the values it declares (`default`: the CommonJS module itself, as
// an ES module sees it).
export type SameExports = Holds<Equal<Exclude<keyof typeof Implementation, 'default'>, keyof typeof Declared>>;

// Classes users construct: their constructors take what the declarations let a user pass, and
// their instances have every declared member, of the declared type.
export const classes: {
  [Name in 'Solver' | 'CaptchaAIError' | 'PermanentError' | 'TransientError' | 'UnsolvableError' | 'SnapshotError'
    | 'SolveTimesError' | 'SolveClosedError' | 'EngineMisuseError']: (typeof Declared)[Name];
} = Implementation;

// Classes only the package constructs (their declared constructors are private): the instances.
declare const pending: InstanceType<typeof Implementation.PendingSolve>;
declare const solution: InstanceType<typeof Implementation.Solution>;
export const instances: [Declared.PendingSolve, Declared.Solution] = [pending, solution];
