// Compiled with `tsc --noEmit` by test/types.test.mjs as a CommonJS module: `require` resolves
// the package's "require" entry and its declarations (gen/index.d.cts, gen/tasks.d.cts).
import { PermanentError, Solver, type Solution, type TaskOf, type TurnstileTask } from 'captchaai-engine';
import engine = require('captchaai-engine');

const solver = new engine.Solver('0123456789abcdef0123456789abcdef', { baseUrl: 'http://127.0.0.1:3000' });
const task: TurnstileTask = { type: 'turnstile', sitekey: 'k', pageurl: 'https://a.example.com/', cookies: 'a=b' };
const same: TaskOf<'turnstile'> = task;

export async function use(): Promise<string> {
  try {
    const solution: Solution = await solver.solve(same);
    return typeof solution.answer === 'string' ? solution.answer : JSON.stringify(solution.answer);
  } catch (error) {
    if (error instanceof PermanentError) return error.code;
    throw error;
  }
}

export const other: Solver = new Solver('0123456789abcdef0123456789abcdef');

// @ts-expect-error: Cloudflare Challenge needs a proxy
const noProxy: engine.Task = { type: 'cloudflare_challenge', pageurl: 'https://a.example.com/' };
void noProxy;
