// Compiled with `tsc --noEmit` by test/types.test.mjs: the declarations describe the package.
import {
  CaptchaAIError,
  PermanentError,
  Solver,
  TransientError,
  UnsolvableError,
  type CloudflareChallengeTask,
  type ProxyType,
  type Solution,
  type Task,
  type TaskOf,
  type TaskType,
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

// The generated task types: one per engine type, the shared fields declared once.
const names: TaskType[] = ['recaptcha_v3_enterprise', 'geetest_v3', 'captchafox', 'friendly_captcha', 'lemin', 'grid'];
const proxy: ProxyType = 'SOCKS5';
const challenge: CloudflareChallengeTask = { type: 'cloudflare_challenge', pageurl: 'https://a.example.com/', proxy: 'h:1', proxytype: proxy, user_agent: 'UA', cookies: 'a=b' };
const grid: TaskOf<'grid'> = { type: 'grid', image: 'aGVsbG8=', instructions: 'cars', grid_size: '4x4', extra: { soft_id: 1 } };
void names;
void challenge;
void grid;
// @ts-expect-error: cookies is text
const badCookies: Task = { type: 'turnstile', sitekey: 'k', pageurl: 'u', cookies: 5 };
// @ts-expect-error: grid sizes are 3x3 and 4x4
const badGrid: TaskOf<'grid'> = { type: 'grid', image: 'i', instructions: 'x', grid_size: '5x5' };
// @ts-expect-error: no such captcha type
const unknownType: TaskType = 'hcaptcha';
void badCookies;
void badGrid;
void unknownType;

// @ts-expect-error: a task needs its type's required fields
const missing: Task = { type: 'recaptcha_v2', pageurl: 'https://a.example.com/' };
// @ts-expect-error: the proxy type is one of four
const badProxy: Task = { type: 'captchafox', sitekey: 'k', pageurl: 'u', proxy: 'h:1', proxytype: 'FTP' };
void missing;
void badProxy;
