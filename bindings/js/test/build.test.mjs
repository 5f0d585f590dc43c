// gen/ was transpiled from exactly the engine component: the core modules jco wrote are
// byte-for-byte the core modules inside target/component/captchaai_engine.wasm (or
// $CAPTCHAAI_ENGINE_WASM), and the generated JS loads exactly those files.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { coreModulesOf } from './support/component-modules.mjs';
import { componentWasmPath, GEN_DIR, GEN_NAME } from '../scripts/paths.mjs';

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

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

  const generatedJs = readFileSync(join(GEN_DIR, `${GEN_NAME}.js`), 'utf8');
  const loaded = [...generatedJs.matchAll(/getCoreModule\('([^']+)'\)/g)].map((m) => m[1]);
  const written = readdirSync(GEN_DIR).filter((name) => name.endsWith('.wasm'));
  assert.deepEqual([...loaded].sort(), [...written].sort(), 'the JS loads exactly the .wasm files in gen/');
  assert.deepEqual(
    loaded.map((name) => sha256(readFileSync(join(GEN_DIR, name)))),
    embedded,
    'each core module jco wrote (in load order) is the component\'s embedded module, byte for byte',
  );
});

test('a component with a changed byte no longer matches (the check can fail)', () => {
  const component = new Uint8Array(readFileSync(componentWasmPath()));
  const [first] = coreModulesOf(component);
  const offset = first.byteOffset + Math.floor(first.length / 2);
  const before = sha256(first);
  component[offset] ^= 0xff;
  assert.notEqual(sha256(coreModulesOf(component)[0]), before);
});

test('a core module or other non-component binary is refused', () => {
  const core = readFileSync(join(GEN_DIR, `${GEN_NAME}.core.wasm`));
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
