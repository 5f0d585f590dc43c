// Transpiles the engine component into gen/ with the pinned jco (package.json devDependencies).
// The component is $CAPTCHAAI_ENGINE_WASM, else target/component/captchaai_engine.wasm at the
// repository root (built by `cargo xtask component`). gen/ is generated, never committed.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transpile } from '@bytecodealliance/jco';
import { componentWasmPath, GEN_DIR, GEN_NAME } from './paths.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const packageRoot = resolve(here, '..');

const wasmPath = componentWasmPath();
if (!existsSync(wasmPath)) {
  console.error(
    `captchaai-engine build: the engine component ${wasmPath} does not exist.\n` +
      'Build it at the repository root with `cargo xtask component` ' +
      '(or point CAPTCHAAI_ENGINE_WASM at a captchaai_engine.wasm).',
  );
  process.exit(1);
}
const component = readFileSync(wasmPath);
const jcoVersion = JSON.parse(
  readFileSync(join(packageRoot, 'node_modules/@bytecodealliance/jco/package.json'), 'utf8'),
).version;
console.log(`captchaai-engine build: jco ${jcoVersion} transpile ${wasmPath} (${component.length} bytes)`);

// Synchronous instantiation: the host can make a fresh instance after a trap.
const { files } = await transpile(component, {
  name: GEN_NAME,
  instantiation: 'sync',
});

rmSync(GEN_DIR, { recursive: true, force: true });
for (const [name, bytes] of Object.entries(files)) {
  const target = join(GEN_DIR, name);
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, bytes);
  console.log(`  gen/${name} (${bytes.length} bytes)`);
}
// Where gen/ came from, for the provenance test and for bug reports.
const source = {
  component: wasmPath,
  component_sha256: createHash('sha256').update(component).digest('hex'),
  component_bytes: component.length,
  jco: jcoVersion,
};
writeFileSync(join(GEN_DIR, 'source.json'), JSON.stringify(source, null, 2) + '\n');
console.log(`captchaai-engine build: done (component sha256 ${source.component_sha256.slice(0, 16)}…)`);
