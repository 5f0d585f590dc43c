// gen/ was transpiled from exactly the engine component: the core modules jco wrote (base64 in
// gen/captchaai_engine.wasm.cjs) are byte-for-byte the core modules inside
// target/component/captchaai_engine.wasm (or $CAPTCHAAI_ENGINE_WASM), and the generated JS loads
// exactly those; gen/ holds only what the package ships.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { coreModulesOf } from './support/component-modules.mjs';
import { componentWasmPath, GEN_DIR, GEN_NAME } from '../scripts/paths.mjs';

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
const require = createRequire(import.meta.url);

/** The core modules gen/ loads, in load order, as SHA-256 digests of what jco wrote. */
function writtenModules() {
  const generatedJs = readFileSync(join(GEN_DIR, `${GEN_NAME}.cjs`), 'utf8');
  const loaded = [...generatedJs.matchAll(/getCoreModule\('([^']+)'\)/g)].map((m) => m[1]);
  const written = require(join(GEN_DIR, `${GEN_NAME}.wasm.cjs`));
  assert.deepEqual([...loaded].sort(), Object.keys(written).sort(), 'the JS loads exactly the modules in gen/');
  return loaded.map((name) => sha256(Buffer.from(written[name], 'base64')));
}

test('the core modules in gen/ are exactly those inside the engine component', () => {
  const component = readFileSync(componentWasmPath());
  const source = JSON.parse(readFileSync(join(GEN_DIR, 'source.json'), 'utf8'));
  assert.equal(
    source.component_sha256,
    sha256(component),
    `gen/ was built from another component than ${componentWasmPath()}: run \`npm run build\``,
  );
  const embedded = coreModulesOf(component).map(sha256);
  assert.ok(embedded.length >= 1, 'the component holds core modules');
  assert.deepEqual(
    writtenModules(),
    embedded,
    'each core module jco wrote (in load order) is the component\'s embedded module, byte for byte',
  );
});

test('gen/ holds what the package ships and nothing else', () => {
  const expected = [`${GEN_NAME}.cjs`, `${GEN_NAME}.wasm.cjs`, 'index.d.cts', 'source.json', 'tasks.d.cts'];
  assert.deepEqual(readdirSync(GEN_DIR).sort(), expected.sort());
  // The instantiation code is jco's with its one `export` made CommonJS (and left out of the
  // sources' type check, tsconfig.check.json).
  const js = readFileSync(join(GEN_DIR, `${GEN_NAME}.cjs`), 'utf8');
  assert.match(js, /^\/\/ @ts-nocheck\n'use strict';\nfunction instantiate\(/);
  assert.match(js, /\nmodule\.exports = \{ instantiate \};\n$/);
  assert.doesNotMatch(js, /^\s*(?:import|export)\b/m);
  // The declarations of the `require` entry are src/'s, importing their .d.cts twins.
  for (const name of ['index', 'tasks']) {
    const esm = readFileSync(join(GEN_DIR, '..', 'src', `${name}.d.ts`), 'utf8');
    const cjs = readFileSync(join(GEN_DIR, `${name}.d.cts`), 'utf8');
    assert.equal(cjs, esm.replaceAll("from './tasks.js'", "from './tasks.cjs'"), `gen/${name}.d.cts`);
  }
});

test('a component with a changed byte no longer matches (the check can fail)', () => {
  const component = new Uint8Array(readFileSync(componentWasmPath()));
  const [first] = coreModulesOf(component);
  const offset = first.byteOffset + Math.floor(first.length / 2);
  component[offset] ^= 0xff;
  assert.notDeepEqual(writtenModules(), coreModulesOf(component).map(sha256));
});

test('a core module or other non-component binary is refused', () => {
  const core = Buffer.from(require(join(GEN_DIR, `${GEN_NAME}.wasm.cjs`))[`${GEN_NAME}.core.wasm`], 'base64');
  assert.throws(() => coreModulesOf(core), /not a component/);
  assert.throws(() => coreModulesOf(Buffer.from('not wasm at all')), /not a WebAssembly binary/);
});

test('a missing component fails the build with a message naming `cargo xtask component`, leaving gen/ alone', () => {
  const before = readFileSync(join(GEN_DIR, 'source.json'), 'utf8');
  const script = fileURLToPath(new URL('../scripts/build.mjs', import.meta.url));
  const result = spawnSync(process.execPath, [script], {
    encoding: 'utf8',
    env: { ...process.env, CAPTCHAAI_ENGINE_WASM: join(GEN_DIR, 'no-such-component.wasm') },
  });
  assert.equal(result.status, 1);
  assert.match(result.stderr, /no-such-component\.wasm does not exist/);
  assert.match(result.stderr, /cargo xtask component/);
  assert.equal(readFileSync(join(GEN_DIR, 'source.json'), 'utf8'), before);
});
