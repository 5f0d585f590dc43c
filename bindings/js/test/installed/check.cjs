'use strict';
// The installed package through `require` (see checks.cjs, loaded with import(): Deno lets a
// CommonJS file require local files only with --allow-read, which the package itself never needs).
const pkg = require('captchaai-engine');

Promise.all([import('captchaai-engine'), import('./checks.cjs')])
  .then(([other, checks]) => (checks.default ?? checks).run(pkg, other, 'require'))
  .catch((error) => {
    console.error(error);
    process.exitCode = 1;
  });
