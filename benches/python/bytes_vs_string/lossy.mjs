// Reads byte strings from stdin, one per line as ":" + hex; prints ":" + the hex of the UTF-8
// bytes of what TextDecoder makes of each. Argument "default" = new TextDecoder() (strips a
// leading BOM, as fetch's Response.text() does); "ignoreBOM" = new TextDecoder('utf-8',
// { ignoreBOM: true }). Run by ../utf8_lossy_agreement.py.
import { readFileSync } from 'node:fs';

const mode = process.argv[2] ?? 'default';
const decoder = mode === 'ignoreBOM' ? new TextDecoder('utf-8', { ignoreBOM: true }) : new TextDecoder();
const encoder = new TextEncoder();
const out = [];
for (const line of readFileSync(0, 'latin1').split('\n')) {
  if (!line.startsWith(':')) continue;
  const bytes = Buffer.from(line.slice(1).trim(), 'hex');
  out.push(':' + Buffer.from(encoder.encode(decoder.decode(bytes))).toString('hex'));
}
process.stdout.write(out.map((l) => l + '\n').join(''));
