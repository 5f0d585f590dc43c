#!/usr/bin/env python3
# pip install wasmtime==50.0.1
#
# What a reply body costs to cross host -> guest in wasmtime-py (the stock `wasmtime.component`
# API, no private patches) as WIT `string` versus `list<u8>`.
#
#   python3 benches/python/bytes_vs_string.py            # builds the guest if needed, then times
#   python3 benches/python/bytes_vs_string.py --rebuild  # rebuild the guest first
#
# The guest (benches/python/bytes_vs_string/) exports
#   take-string: func(body: string) -> u32
#   take-bytes:  func(body: list<u8>) -> u32
# and returns the length. Building it needs cargo and the wasm32-unknown-unknown target; the
# component goes to target/bytes_vs_string/bench.wasm (imports nothing).
#
# Rows:
#   string (str ready)      take-string with a str the caller already has
#   string (decode + call)  bytes.decode('utf-8', 'replace') then take-string: what a host that
#                           receives bytes from its HTTP client pays for the string ABI
#   list<u8>                take-bytes with the bytes object
#   list<u8> fast path      NOT the stock API: the same call after replacing ListType.convert_to_c
#                           for bytes by a 15-line strided copy (bytes_fast_path below), to show
#                           what a Python wrapper could win if it patched wasmtime-py's internals
# Each figure is the minimum over several timeit repeats, in microseconds of this process's CPU
# time per call (time.process_time, so other load on the machine inflates it less than wall time).

import argparse
import os
import platform
import subprocess
import sys
import time
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(HERE, "bytes_vs_string")
TARGET = os.path.join(REPO, "target", "bytes_vs_string")
WASM = os.path.join(TARGET, "bench.wasm")


def build() -> None:
    core = os.path.join(TARGET, "wasm32-unknown-unknown", "release", "bytes_vs_string_guest.wasm")
    cargo = ["cargo"]
    subprocess.run(cargo + ["build", "--release", "-q", "-p", "bytes-vs-string-guest",
                            "--target", "wasm32-unknown-unknown", "--target-dir", TARGET],
                   cwd=SRC, check=True)
    subprocess.run(cargo + ["run", "--release", "-q", "-p", "componentize", "--target-dir", TARGET,
                            "--", core, WASM], cwd=SRC, check=True)


def body_of(size: int) -> bytes:
    """An ASCII reply-like body of exactly `size` bytes (a JSON answer with a long token)."""
    if size == 0:
        return b""
    head, tail = b'{"status":1,"request":"', b'"}'
    fill = size - len(head) - len(tail)
    assert fill >= 0
    alphabet = b"03AGdBq24PBCbwiDRaS_MJ7Z-abcdefghijklmnopqrstuvwxyz0123456789"
    token = (alphabet * (fill // len(alphabet) + 1))[:fill]
    return head + token + tail


def bytes_fast_path():
    """Patch wasmtime-py (private internals) so a `bytes` value for list<u8> is converted with one
    strided copy instead of one ctypes call per byte. Returns a function that undoes the patch."""
    import ctypes
    from wasmtime import _ffi as ffi
    from wasmtime.component._types import ListType

    stock = ListType.convert_to_c
    size = ctypes.sizeof(ffi.wasmtime_component_val_t)
    offset = ffi.wasmtime_component_val_t.of.offset
    u8 = ffi.WASMTIME_COMPONENT_U8.value

    def convert_to_c(self, store, val, ptr):
        if type(val) is not bytes or not self._is_bytes():
            return stock(self, store, val, ptr)
        n = len(val)
        raw = ffi.wasmtime_component_vallist_t()
        ffi.wasmtime_component_vallist_new_uninit(raw, n)
        if n:
            buf = bytearray(size * n)
            buf[0::size] = bytes((u8,)) * n
            buf[offset::size] = val
            ctypes.memmove(raw.data, (ctypes.c_char * len(buf)).from_buffer(buf), len(buf))
        ptr.contents.kind = ffi.WASMTIME_COMPONENT_LIST
        ptr.contents.of.list = raw

    ListType.convert_to_c = convert_to_c
    return lambda: setattr(ListType, "convert_to_c", stock)


def per_call_us(fn, repeat: int, budget_s: float = 0.25) -> float:
    """Minimum over `repeat` runs of the per-call time, each run sized to about `budget_s`."""
    t = timeit.Timer(fn, timer=time.process_time)
    number, elapsed = 1, t.timeit(1)
    while elapsed < budget_s / 10 and number < 1_000_000:
        number *= 10
        elapsed = t.timeit(number)
    number = max(1, int(number * (budget_s / max(elapsed, 1e-9))))
    return min(t.repeat(repeat=repeat, number=number)) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rebuild", action="store_true", help="rebuild the guest component first")
    ap.add_argument("--repeat", type=int, default=11, help="timeit repeats (the minimum is kept)")
    args = ap.parse_args()

    if args.rebuild or not os.path.exists(WASM):
        build()

    import wasmtime
    from wasmtime import Engine, Store
    from wasmtime.component import Component, Linker

    engine = Engine()
    component = Component.from_file(engine, WASM)
    store = Store(engine)
    instance = Linker(engine).instantiate(store, component)
    take_string = instance.get_func(store, "take-string")
    take_bytes = instance.get_func(store, "take-bytes")

    try:
        from importlib.metadata import version
        wt_version = version("wasmtime")
    except Exception:  # pragma: no cover
        wt_version = getattr(wasmtime, "__version__", "?")
    print(f"wasmtime-py {wt_version}, Python {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} cpus; component {os.path.getsize(WASM)} bytes")
    print(f"load average {os.getloadavg()[0]:.2f}; min of {args.repeat} repeats, "
          f"microseconds of process CPU time per call\n")

    cases = [("0 B (call overhead)", b"")]
    cases += [(f"{n} B" if n < 1024 else f"{n // 1024} KiB", body_of(n)) for n in (64, 1024, 16384)]
    invalid = bytearray(body_of(64))
    invalid[-3] = 0xFF  # {"status":1,"request":"...\xff"}: one invalid byte inside the token
    cases.append(("64 B, one 0xFF byte", bytes(invalid)))

    rows = []
    for label, body in cases:
        text = body.decode("utf-8", "replace")
        # Sanity: both functions see what we sent (U+FFFD is 3 bytes in UTF-8).
        assert take_bytes(store, body) == len(body)
        assert take_string(store, text) == len(text.encode("utf-8"))
        s_ready = per_call_us(lambda: take_string(store, text), args.repeat)
        s_decode = per_call_us(lambda: take_string(store, body.decode("utf-8", "replace")), args.repeat)
        b = per_call_us(lambda: take_bytes(store, body), args.repeat)
        undo = bytes_fast_path()
        try:
            assert take_bytes(store, body) == len(body)
            fast = per_call_us(lambda: take_bytes(store, body), args.repeat)
        finally:
            undo()
        rows.append((label, s_ready, s_decode, b, fast))

    print("| body | string (str ready) | string (decode + call) | list<u8> (stock) | list<u8> / string (decode + call) | list<u8> fast path (patched, not stock) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, s_ready, s_decode, b, fast in rows:
        print(f"| {label} | {s_ready:.1f} | {s_decode:.1f} | {b:.1f} | {b / s_decode:.1f}x | {fast:.1f} |")

    # Per byte: slope between the 1 KiB and 16 KiB rows.
    (_, s1, d1, b1, f1), (_, s16, d16, b16, f16) = rows[2], rows[3]
    per_kib = lambda lo, hi: (hi - lo) / 15
    print(f"\nmarginal cost per KiB (1 KiB -> 16 KiB): string {per_kib(s1, s16):.2f} µs, "
          f"decode + string {per_kib(d1, d16):.2f} µs, list<u8> stock {per_kib(b1, b16):.1f} µs, "
          f"list<u8> fast path {per_kib(f1, f16):.2f} µs")


if __name__ == "__main__":
    main()
