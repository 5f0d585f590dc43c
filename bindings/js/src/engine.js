// The engine component as transpiled by jco into gen/ (`npm run build`): compiled once per
// process, instantiated per host. Raw WIT values stay in this file and in convert.js; nothing
// here knows the protocol.
import { readFileSync } from 'node:fs';

const GEN_URL = new URL('../gen/', import.meta.url);

let generated;
try {
  generated = await import(new URL('captchaai_engine.js', GEN_URL).href);
} catch (error) {
  throw new Error(
    'captchaai-engine: the transpiled engine (gen/captchaai_engine.js) is missing or broken; ' +
      'run `npm run build` in bindings/js (it needs target/component/captchaai_engine.wasm from ' +
      '`cargo xtask component`)',
    { cause: error },
  );
}

/** Compiled core modules, by file name (compiled on first use, shared by every instance). */
const coreModules = new Map();

function coreModule(name) {
  let module = coreModules.get(name);
  if (!module) {
    module = new WebAssembly.Module(readFileSync(new URL(name, GEN_URL)));
    coreModules.set(name, module);
  }
  return module;
}

/** A fresh instance of the component: `{types, engine, account}` as jco exports them. */
export function instantiateComponent() {
  return generated.instantiate(coreModule, {});
}

/**
 * A `result` error returned by the engine, which jco throws as `ComponentError` with the WIT error
 * value in `payload`; anything else thrown by a call is a trap or a binding bug.
 */
export function isEngineResultError(error) {
  return error instanceof Error && error.constructor?.name === 'ComponentError' && Object.hasOwn(error, 'payload');
}

/** Runs `call`; returns `{ok: value}` or `{err: payload}` for an engine `result` error. */
export function engineResult(call) {
  try {
    return { ok: call() };
  } catch (error) {
    if (isEngineResultError(error)) return { err: error.payload };
    throw error;
  }
}
