'use strict';
// The engine component as transpiled by jco into gen/ (`npm run build`): compiled once per
// process, instantiated per host. Raw WIT values stay in this file and in convert.cjs; nothing
// here knows the protocol. Everything loads synchronously as modules (the core modules are
// base64 inside gen/captchaai_engine.wasm.cjs): `require` works as well as `import`, and no file
// is read at run time.

/**
 * jco's raw WIT bindings (`{types, engine, account}` of one instance), deliberately untyped here:
 * the golden vectors drive every call through them and compare each result with the stored
 * transcript (test/vectors.test.mjs).
 * @typedef {any} EngineRoot
 */

/** @type {{instantiate: (getCoreModule: (name: string) => WebAssembly.Module, imports: object) => EngineRoot}} */
let generated;
/** @type {Record<string, string>} */
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

/**
 * Bytes of base64 text, with whatever the runtime has.
 * @param {string} text
 * @returns {Uint8Array}
 */
function decodeBase64(text) {
  /** @type {{fromBase64?: (text: string) => Uint8Array}} */
  const uint8 = /** @type {any} */ (Uint8Array);
  if (typeof uint8.fromBase64 === 'function') return uint8.fromBase64(text);
  /** @type {{Buffer?: {from(text: string, encoding: string): Uint8Array}}} */
  const node = /** @type {any} */ (globalThis);
  if (typeof node.Buffer?.from === 'function') return node.Buffer.from(text, 'base64');
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Compiled core modules, by file name (compiled on first use, shared by every instance).
 * @type {Map<string, WebAssembly.Module>} */
const coreModules = new Map();

/** @param {string} name */
function coreModule(name) {
  let module = coreModules.get(name);
  if (!module) {
    const text = Object.hasOwn(coreModuleText, name) ? coreModuleText[name] : undefined;
    if (typeof text !== 'string') {
      throw new Error(`captchaai-engine: gen/ has no core module ${name}; rebuild it with \`npm run build\``);
    }
    module = new WebAssembly.Module(/** @type {BufferSource} */ (decodeBase64(text)));
    coreModules.set(name, module);
  }
  return module;
}

/** A fresh instance of the component: `{types, engine, account}` as jco exports them.
 * @returns {EngineRoot} */
function instantiateComponent() {
  return generated.instantiate(coreModule, {});
}

/**
 * A `result` error returned by the engine, which jco throws as `ComponentError` with the WIT error
 * value in `payload`; anything else thrown by a call is a trap or a binding bug.
 * @param {unknown} error
 * @returns {error is Error & {payload: any}}
 */
function isEngineResultError(error) {
  return error instanceof Error && error.constructor?.name === 'ComponentError' && Object.hasOwn(error, 'payload');
}

/**
 * Runs `call`; returns `{ok: value}` or `{err: payload}` for an engine `result` error.
 * @template T
 * @param {() => T} call
 * @returns {{ok: T, err?: undefined} | {ok?: undefined, err: any}}
 */
function engineResult(call) {
  try {
    return { ok: call() };
  } catch (error) {
    if (isEngineResultError(error)) return { err: error.payload };
    throw error;
  }
}

module.exports = { instantiateComponent, isEngineResultError, engineResult };
