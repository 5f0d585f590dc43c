// The core modules embedded in a component binary, in order (top-level and nested components),
// read straight from the binary format: a preamble, then sections `id, size (LEB128), payload`;
// section 1 is a core module, section 4 a nested component.

const CORE_MODULE_SECTION = 1;
const COMPONENT_SECTION = 4;

function readU32Leb(bytes, pos) {
  let result = 0;
  let shift = 0;
  for (;;) {
    if (pos >= bytes.length) throw new Error('truncated LEB128');
    const byte = bytes[pos++];
    result += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) return [result, pos];
    shift += 7;
    if (shift > 28) throw new Error('LEB128 too long');
  }
}

/** `[Uint8Array, ...]`: every core module in the component, depth-first in binary order. */
export function coreModulesOf(component) {
  const bytes = component instanceof Uint8Array ? component : new Uint8Array(component);
  const magic = [0x00, 0x61, 0x73, 0x6d];
  if (!magic.every((b, i) => bytes[i] === b)) throw new Error('not a WebAssembly binary');
  // Layer 1 (bytes 6-7) is a component; 0 is a core module.
  if (bytes[6] !== 0x01 || bytes[7] !== 0x00) throw new Error('not a component (layer is not 1)');
  const modules = [];
  const walk = (body) => {
    let pos = 8;
    while (pos < body.length) {
      const id = body[pos++];
      let size;
      [size, pos] = readU32Leb(body, pos);
      const payload = body.subarray(pos, pos + size);
      if (payload.length !== size) throw new Error('truncated section');
      if (id === CORE_MODULE_SECTION) modules.push(payload);
      else if (id === COMPONENT_SECTION) walk(payload);
      pos += size;
    }
  };
  walk(bytes);
  return modules;
}
