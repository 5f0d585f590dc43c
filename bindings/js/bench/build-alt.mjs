// Transpiles the engine component with the alternative jco (ALT_JCO, default 1.35.0, fetched by
// npx into the npm cache, not a dependency of the package) into bench/alt/, for overhead.mjs.
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { componentWasmPath, GEN_NAME } from '../scripts/paths.mjs';

export const ALT_JCO = process.env.ALT_JCO || '1.35.0';
const out = fileURLToPath(new URL('alt/', import.meta.url));
const wasm = componentWasmPath();
if (!existsSync(wasm)) {
  console.error(`${wasm} does not exist: build it with \`cargo xtask component\``);
  process.exit(1);
}
rmSync(out, { recursive: true, force: true });
console.log(`bench: transpiling with @bytecodealliance/jco@${ALT_JCO} into bench/alt/ (npx; first run downloads it)`);
const result = spawnSync(
  'npx',
  ['--yes', `@bytecodealliance/jco@${ALT_JCO}`, 'transpile', wasm, '-o', out, '--name', GEN_NAME, '--instantiation', 'sync', '--quiet'],
  { stdio: 'inherit' },
);
if (result.status !== 0) process.exit(result.status ?? 1);
writeFileSync(new URL('alt/source.json', import.meta.url), JSON.stringify({ component: wasm, jco: ALT_JCO }, null, 2) + '\n');
