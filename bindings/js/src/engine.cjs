'use strict';
// The engine component as transpiled by jco into gen/ (`npm run build`): compiled once per
// process, instantiated per host. Raw WIT values stay in this file and in convert.cjs; nothing
// here knows the protocol. Everything loads synchronously as modules (the core modules are
// base64 inside gen/captchaai_engine.wasm.cjs): `require` works as well as `import`, and no file
// is read at run time.

let generated;
let coreModuleText;
try {
  generated = require('../gen/captchaai_engine.cjs');
  coreModuleText = require('../gen/captchaai_engine.wasm.cjs');
} catch (error) {
  throw new Error(
    'captchaai-engine: the transpiled engine (gen/captchaai_engine.cjs, gen/captchaai_engine.wasm.cjs) is ' +
      'missing or broken; run `npm run build` in bindings/js (it needs target/component/captchaai_engine.wasm ' +
      'from `cargo xtask component`)',
    { cause: error },
  );
}

/** Bytes of base64 text, with whatever the runtime has. */
function decodeBase64(text) {
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(text);
  if (typeof globalThis.Buffer === 'function') return globalThis.Buffer.from(text, 'base64');
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Compiled core modules, by file name (compiled on first use, shared by every instance). */
const coreModules = new Map();

function coreModule(name) {
  let module = coreModules.get(name);
  if (!module) {
    const text = Object.hasOwn(coreModuleText, name) ? coreModuleText[name] : undefined;
    if (typeof text !== 'string') {
      throw new Error(`captchaai-engine: gen/ has no core module ${name}; rebuild it with \`npm run build\``);
    }
    module = new WebAssembly.Module(decodeBase64(text));
    coreModules.set(name, module);
  }
  return module;
}

/** A fresh instance of the component: `{types, engine, account}` as jco exports them. */
function instantiateComponent() {
  return generated.instantiate(coreModule, {});
}

/**
 * A `result` error returned by the engine, which jco throws as `ComponentError` with the WIT error
 * value in `payload`; anything else thrown by a call is a trap or a binding bug.
 */
function isEngineResultError(error) {
  return error instanceof Error && error.constructor?.name === 'ComponentError' && Object.hasOwn(error, 'payload');
}

/** Runs `call`; returns `{ok: value}` or `{err: payload}` for an engine `result` error. */
function engineResult(call) {
  try {
    return { ok: call() };
  } catch (error) {
    if (isEngineResultError(error)) return { err: error.payload };
    throw error;
  }
}

module.exports = { instantiateComponent, isEngineResultError, engineResult };
