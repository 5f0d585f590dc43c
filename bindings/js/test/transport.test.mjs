// The driver's HTTP sending against real loopback servers started here: bodies decoded the
// WIT's way (BOM kept, invalid UTF-8 replaced), the request posted exactly as given, and each
// failure reported as the right transport error.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import { Clock, send } from '../src/transport.cjs';

let server;
let base;
const received = [];
// Resolvers of `arrival(url)`: called as a request for that URL has been read whole.
const awaited = [];
/** Resolves once the server has read a request for `url`. */
const arrival = (url) => new Promise((resolve) => awaited.push({ url, resolve }));
before(async () => {
  server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      received.push({ url: req.url, method: req.method, type: req.headers['content-type'], body: Buffer.concat(chunks) });
      for (const waiter of awaited.filter((w) => w.url === req.url)) waiter.resolve();
      switch (req.url) {
        case '/bom':
          return res.end(Buffer.from([0xef, 0xbb, 0xbf, 0x4f, 0x4b, 0x7c, 0x31]));
        case '/invalid':
          return res.end(Buffer.from([0x4f, 0x4b, 0x7c, 0xff, 0xfe, 0x41, 0xe2, 0x82]));
        case '/status':
          res.writeHead(502, { 'content-type': 'text/html' });
          return res.end('<html>502 Bad Gateway</html>');
        case '/redirect':
          res.writeHead(302, { location: '/bom' });
          return res.end('moved');
        case '/silent':
          return; // never answers
        case '/broken':
          return req.socket.destroy();
        default:
          return res.end('OK');
      }
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const clock = new Clock();
const request = (path, body = { tag: 'form', val: 'a=1&b=%C3%A9' }, timeoutMs = 5_000n) => ({
  id: 1,
  kind: 'submit',
  at: 0n,
  url: `${base}${path}`,
  contentType: body.tag === 'form' ? 'application/x-www-form-urlencoded' : 'multipart/form-data; boundary=x',
  body,
  timeoutMs,
});

test('a form body is posted exactly as given with its content type', async () => {
  const reply = await send(fetch, clock, request('/echo'));
  assert.deepEqual(reply, { tag: 'ok', val: { status: 200, body: 'OK' } });
  const last = received.at(-1);
  assert.equal(last.method, 'POST');
  assert.equal(last.type, 'application/x-www-form-urlencoded');
  assert.equal(last.body.toString('latin1'), 'a=1&b=%C3%A9');
});

test('multipart bytes are posted byte for byte', async () => {
  const bytes = new Uint8Array([0, 1, 2, 0xff, 0x80, 13, 10]);
  await send(fetch, clock, request('/echo', { tag: 'multipart', val: bytes }));
  const last = received.at(-1);
  assert.equal(last.type, 'multipart/form-data; boundary=x');
  assert.deepEqual([...last.body], [...bytes]);
});

test('a BOM is kept (TextDecoder with ignoreBOM), as in the other hosts', async () => {
  const reply = await send(fetch, clock, request('/bom'));
  assert.equal(reply.val.body, '\ufeffOK|1');
});

test('invalid UTF-8 becomes U+FFFD per maximal sequence', async () => {
  const reply = await send(fetch, clock, request('/invalid'));
  // ff, fe: one each; e2 82 (truncated 3-byte sequence): one.
  assert.equal(reply.val.body, 'OK|\ufffd\ufffdA\ufffd');
});

test('any status is a reply, and redirects are not followed', async () => {
  assert.deepEqual(await send(fetch, clock, request('/status')), {
    tag: 'ok',
    val: { status: 502, body: '<html>502 Bad Gateway</html>' },
  });
  const redirected = await send(fetch, clock, request('/redirect'));
  assert.deepEqual(redirected, { tag: 'ok', val: { status: 302, body: 'moved' } });
});

test('no reply within timeout-ms is a timeout, on the clock\'s scale', { timeout: 10_000 }, async () => {
  // 200 s on a clock 1,000 times faster than real time: 200 ms real. The clock itself shows the
  // whole timeout passed before the request was given up (less the 1 ms real, 1 s on this
  // clock, a timer may round off).
  const fast = new Clock(1_000);
  const started = fast.nowMs();
  assert.deepEqual(await send(fetch, fast, request('/silent', undefined, 200_000n)), { tag: 'err', val: 'timeout' });
  const waited = fast.nowMs() - started;
  assert.ok(waited >= 199_000, `gave up after ${waited} ms (clock time)`);
});

test('a connection dropped after sending is broken', async () => {
  assert.deepEqual(await send(fetch, clock, request('/broken')), { tag: 'err', val: 'broken' });
});

test('nothing listening is connect', async () => {
  const closed = createServer();
  await new Promise((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const { port } = closed.address();
  await new Promise((resolve) => closed.close(resolve));
  const r = { ...request('/'), url: `http://127.0.0.1:${port}/in.php` };
  assert.deepEqual(await send(fetch, clock, r), { tag: 'err', val: 'connect' });
});

test('the caller\'s abort rejects with its reason (not a transport error)', async () => {
  const stop = new AbortController();
  const arrived = arrival('/silent');
  const pending = send(fetch, clock, request('/silent'), stop.signal);
  await arrived; // aborted while the server holds the request
  stop.abort(new Error('stopped by the caller'));
  await assert.rejects(pending, /stopped by the caller/);
});

test('the clock sleeps until a due time and never runs backwards', async () => {
  const due = clock.nowMs() + 30;
  await clock.sleepUntil(due);
  assert.ok(clock.nowMs() >= due);
  // Scaled sleeps are shorter in real time: 5 s on a clock 100 times faster (50 ms) ends before
  // a real 1 s timer set after it (timers fire in the order they are due, however late they
  // run; unscaled, the sleep would end 4 s after that timer).
  const fast = new Clock(100);
  const start = fast.nowMs();
  let unscaled;
  const first = await Promise.race([
    fast.sleepUntil(start + 5_000).then(() => 'scaled'),
    new Promise((resolve) => (unscaled = setTimeout(() => resolve('unscaled'), 1_000))),
  ]);
  clearTimeout(unscaled);
  assert.equal(first, 'scaled', 'a scaled sleep lasts its time divided by the scale');
  assert.ok(fast.nowMs() >= start + 5_000);
  assert.throws(() => new Clock(0), RangeError);
});
