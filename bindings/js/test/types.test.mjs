// The hand-written declarations (src/index.d.ts) type-check a usage example under strict mode,
// including lines that must be refused (@ts-expect-error).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

test('src/index.d.ts type-checks test/types/usage.ts (tsc --strict)', { timeout: 120_000 }, () => {
  const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
  const project = fileURLToPath(new URL('types/tsconfig.json', import.meta.url));
  const result = spawnSync(process.execPath, [tsc, '-p', project], { encoding: 'utf8' });
  assert.equal(result.status, 0, `tsc failed:\n${result.stdout}${result.stderr}`);
});
