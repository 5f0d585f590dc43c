// Where the build reads the component from and writes the transpiled engine to.
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The transpiled engine's directory. */
export const GEN_DIR = resolve(packageRoot, 'gen');
/** The base name of the transpiled files (gen/captchaai_engine.js, .core.wasm, ...). */
export const GEN_NAME = 'captchaai_engine';

/** $CAPTCHAAI_ENGINE_WASM, else the repository's target/component/captchaai_engine.wasm. */
export function componentWasmPath() {
  const fromEnv = process.env.CAPTCHAAI_ENGINE_WASM;
  if (fromEnv) return resolve(fromEnv);
  return resolve(packageRoot, '../../target/component/captchaai_engine.wasm');
}
