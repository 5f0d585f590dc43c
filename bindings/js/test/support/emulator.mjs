// Starts the CaptchaAI emulator as a child process on 127.0.0.1 (port 0) and stops it.
// The binary is $CAPTCHAAI_EMULATOR, else target/release/captchaai-emulator at the repository root.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

export function emulatorPath() {
  return process.env.CAPTCHAAI_EMULATOR || fileURLToPath(new URL('../../../../target/release/captchaai-emulator', import.meta.url));
}

/**
 * Runs the emulator with `args` and resolves with `{url, stop}` once it prints its address
 * (rejects after `startupMs`). `stop()` kills it and waits for it to exit.
 */
export async function startEmulator(args, { startupMs = 10_000 } = {}) {
  const path = emulatorPath();
  if (!existsSync(path)) {
    throw new Error(
      `the CaptchaAI emulator ${path} does not exist: build it with ` +
        '`cargo build --release -p captchaai-emulator` or set CAPTCHAAI_EMULATOR',
    );
  }
  const child = spawn(path, ['--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`the emulator did not start within ${startupMs} ms`)), startupMs);
    const lines = createInterface({ input: child.stdout });
    const fail = (error) => {
      clearTimeout(timer);
      lines.close();
      child.kill('SIGKILL');
      reject(new Error(`${error.message}\nstderr: ${stderr}`));
    };
    const onExit = (code) => fail(new Error(`the emulator exited with ${code}`));
    child.once('error', fail);
    child.once('exit', onExit);
    lines.on('line', (line) => {
      const match = /emulator listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
      if (match) {
        clearTimeout(timer);
        child.removeListener('exit', onExit);
        resolve(match[1]);
      }
    });
  });
  return {
    url,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
