// The installed package through `import` (see checks.cjs).
import * as pkg from 'captchaai-engine';
import { createRequire } from 'node:module';
import checks from './checks.cjs';

const other = createRequire(import.meta.url)('captchaai-engine');
await checks.run(pkg, other, 'import');
