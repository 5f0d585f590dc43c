// Compiled with `tsc --noEmit` by test/types.test.mjs: the declarations describe the package.
import {
  CaptchaAIError,
  PermanentError,
  Solver,
  TransientError,
  UnsolvableError,
  type Solution,
  type Task,
} from 'captchaai-engine';

const solver = new Solver('0123456789abcdef0123456789abcdef', { requestTimeoutMs: 30_000, jitterSeed: 7n }, { threads: 4 });

const tasks: Task[] = [
  { type: 'recaptcha_v2', sitekey: 'k', pageurl: 'https://a.example.com/', invisible: true },
  { type: 'turnstile', sitekey: 'k', pageurl: 'https://a.example.com/', extra: { soft_id: 123 } },
  { type: 'image', image: 'aGVsbG8=', numeric: 1, upload: 'multipart' },
  { type: 'bls', instructions: 'cars', images: ['a', 'b'] },
  { type: 'cloudflare_challenge', pageurl: 'https://a.example.com/', proxy: 'h:1', proxytype: 'HTTP' },
];

export async function use(): Promise<string | null> {
  for (const task of tasks) {
    try {
      const solution: Solution = await solver.solve(task);
      const token: string | null = typeof solution.answer === 'string' ? solution.answer : null;
      const fresh: boolean = solution.isFresh(90_000);
      const expires: number | null = solution.expiresAt;
      if (fresh && expires !== null) return token;
    } catch (error) {
      if (error instanceof TransientError) {
        const wait: number | null = error.retryAfter;
        void wait;
      } else if (error instanceof UnsolvableError || error instanceof PermanentError) {
        const where: 'input' | 'service' | 'no_answer' = error.origin;
        void where;
      } else if (error instanceof CaptchaAIError) {
        const code: string = error.code;
        void code;
      }
    }
  }
  const pending = solver.start({ type: 'geetest_v4', captcha_id: 'c', pageurl: 'https://a.example.com/' });
  const checkpoints: string[] = [];
  await solver.run(pending, { onCheckpoint: (snapshot) => void checkpoints.push(snapshot) });
  const resumed = solver.resume(checkpoints[0] ?? '');
  const info = await solver.threadsInfo();
  const balance: number = await solver.balance();
  void resumed;
  return `${info.free} ${balance}`;
}

// @ts-expect-error: a task needs its type's required fields
const missing: Task = { type: 'recaptcha_v2', pageurl: 'https://a.example.com/' };
// @ts-expect-error: the proxy type is one of four
const badProxy: Task = { type: 'captchafox', sitekey: 'k', pageurl: 'u', proxy: 'h:1', proxytype: 'FTP' };
void missing;
void badProxy;
