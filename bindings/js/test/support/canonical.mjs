// Canonical JSON: keys sorted, no spaces, bigints written as their exact digits. Two values are
// the same transcript exactly when their canonical texts are equal. Byte arrays are written as
// arrays of numbers.

export function canonicalJson(value) {
  if (typeof value === 'bigint') return value.toString();
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isSafeInteger(value) && Number.isInteger(value)) {
      throw new Error(`integer ${value} is beyond 2^53: it cannot be compared exactly`);
    }
    const text = JSON.stringify(value);
    if (text === undefined) throw new Error(`not JSON: ${String(value)}`);
    return text;
  }
  if (ArrayBuffer.isView(value)) return canonicalJson([...value]);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  // Absent (undefined) members are left out, as JSON.stringify does.
  const keys = Object.keys(value)
    .filter((k) => value[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
}
