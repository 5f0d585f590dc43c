// The hand-written declarations (src/index.d.ts) type-check a usage example under strict mode,
// including lines that must be refused (@ts-expect-error): with the package's own tsconfig, and
// as a user's new project compiles them (no lib for disposables, no @types/node). And they are
// checked against the implementation: the sources' JSDoc types, checked under strict too.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
const packageRoot = fileURLToPath(new URL('..', import.meta.url));

function compile(args, cwd) {
  const result = spawnSync(process.execPath, [tsc, ...args], { cwd, encoding: 'utf8' });
  assert.equal(result.status, 0, `tsc ${args.join(' ')} failed:\n${result.stdout}${result.stderr}`);
}

test('src/index.d.ts type-checks test/types/usage.ts (tsc --strict)', { timeout: 120_000 }, () => {
  compile(['-p', fileURLToPath(new URL('types/tsconfig.json', import.meta.url))]);
});

test('the sources\' JSDoc types check under strict, and src/index.d.ts matches them (tsconfig.check.json)', { timeout: 120_000 }, () => {
  compile(['-p', join(packageRoot, 'tsconfig.check.json')]);
});

test('the declarations compile in a new project: `strict` and TypeScript\'s defaults, and `tsc --init`', { timeout: 120_000 }, (t) => {
  const project = mkdtempSync(join(tmpdir(), 'captchaai-ts-'));
  t.after(() => rmSync(project, { recursive: true, force: true }));
  mkdirSync(join(project, 'node_modules'));
  symlinkSync(packageRoot, join(project, 'node_modules', 'captchaai-engine'), 'dir');
  copyFileSync(fileURLToPath(new URL('types/usage.ts', import.meta.url)), join(project, 'usage.ts'));
  writeFileSync(join(project, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  // Every option TypeScript's default but `strict` (its default libraries, no @types/node; the
  // declarations' own errors are reported: no skipLibCheck).
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, noEmit: true }, files: ['usage.ts'] }));
  compile(['-p', 'tsconfig.json'], project);
  rmSync(join(project, 'tsconfig.json'));
  compile(['--init'], project);
  compile(['-p', 'tsconfig.json', '--noEmit', '--skipLibCheck', 'false'], project);
});
