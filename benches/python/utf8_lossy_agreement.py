#!/usr/bin/env python3
# No pip install needed (standard library only). Needs rustc and node on PATH.
#
#   python3 benches/python/utf8_lossy_agreement.py [--random N] [--seed S]
#
# Do the three lossy UTF-8 decoders a host might use for a reply body agree byte for byte?
#   python  bytes.decode('utf-8', 'replace')
#   node    new TextDecoder()                           (fatal: false; what fetch's .text() uses)
#   node    new TextDecoder('utf-8', {ignoreBOM: true})
#   rust    String::from_utf8_lossy
# Runs a table of tricky invalid sequences (truncated multibyte, overlongs, surrogates, F5..FF,
# lone continuation bytes, code points past U+10FFFF, a BOM) and then N random byte strings
# biased towards bytes >= 0x80. Prints the table and a verdict; exits 1 on a disagreement
# between python and rust or python and node-ignoreBOM (the node default's BOM stripping is
# reported, not failed).

import argparse
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(HERE, "bytes_vs_string")
TARGET = os.path.join(REPO, "target", "bytes_vs_string")

CASES = [
    # (label, bytes)
    ("valid ASCII + U+00E9", b"ok \xc3\xa9"),
    ("valid U+10FFFF", b"\xf4\x8f\xbf\xbf"),
    ("valid U+FFFD itself", b"\xef\xbf\xbd"),
    ("issue 7 body tok\\xff", b'{"status":1,"request":"tok\xff"}'),
    ("truncated 2-byte C3", b"a\xc3"),
    ("truncated 2-byte C3 then ASCII", b"\xc3A"),
    ("truncated 3-byte E2 82", b"\xe2\x82"),
    ("truncated 3-byte E2 82 then ASCII", b"\xe2\x82A"),
    ("truncated 4-byte F0 9F 98", b"\xf0\x9f\x98"),
    ("truncated 4-byte F0 9F 98 then ASCII", b"\xf0\x9f\x98A"),
    ("two truncated 3-byte in a row", b"\xe2\x82\xe2\x82"),
    ("overlong 2-byte C0 AF ('/')", b"\xc0\xaf"),
    ("overlong 2-byte C1 BF", b"\xc1\xbf"),
    ("overlong 3-byte E0 80 AF", b"\xe0\x80\xaf"),
    ("overlong 3-byte E0 9F BF", b"\xe0\x9f\xbf"),
    ("overlong 4-byte F0 80 80 AF", b"\xf0\x80\x80\xaf"),
    ("overlong 4-byte F0 8F BF BF", b"\xf0\x8f\xbf\xbf"),
    ("overlong NUL C0 80", b"\xc0\x80"),
    ("surrogate ED A0 80 (U+D800)", b"\xed\xa0\x80"),
    ("surrogate ED BF BF (U+DFFF)", b"\xed\xbf\xbf"),
    ("CESU pair ED A0 BD ED B8 80", b"\xed\xa0\xbd\xed\xb8\x80"),
    ("truncated surrogate ED A0", b"\xed\xa0"),
    ("F5 80 80 80", b"\xf5\x80\x80\x80"),
    ("F7 BF BF BF (U+1FFFFF)", b"\xf7\xbf\xbf\xbf"),
    ("5-byte F8 88 80 80 80", b"\xf8\x88\x80\x80\x80"),
    ("6-byte FC 84 80 80 80 80", b"\xfc\x84\x80\x80\x80\x80"),
    ("FE FF", b"\xfe\xff"),
    ("FF alone", b"\xff"),
    ("lone continuation 80", b"\x80"),
    ("lone continuation BF", b"\xbf"),
    ("three continuations 80 80 80", b"\x80\x80\x80"),
    ("beyond U+10FFFF: F4 90 80 80", b"\xf4\x90\x80\x80"),
    ("beyond, truncated: F4 90 80", b"\xf4\x90\x80"),
    ("truncated overlong E0 80", b"\xe0\x80"),
    ("truncated overlong F0 80", b"\xf0\x80"),
    ("valid 4-byte then lone 80", b"\xf0\x9f\x98\x80\x80"),
    ("NUL byte", b"a\x00b"),
    ("leading BOM EF BB BF", b"\xef\xbb\xbf{}"),
    ("two BOMs", b"\xef\xbb\xbf\xef\xbb\xbf{}"),
    ("empty", b""),
]


def rust_decoder() -> str:
    exe = os.path.join(TARGET, "lossy")
    src = os.path.join(SRC, "lossy.rs")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        os.makedirs(TARGET, exist_ok=True)
        subprocess.run(["rustc", "-O", "--edition=2021", src, "-o", exe], check=True)
    return exe


def run_lines(cmd, inputs):
    data = "".join(":" + b.hex() + "\n" for b in inputs)
    with tempfile.TemporaryFile() as f:
        f.write(data.encode())
        f.seek(0)
        out = subprocess.run(cmd, stdin=f, capture_output=True, check=True).stdout.decode()
    lines = [l for l in out.split("\n") if l.startswith(":")]
    assert len(lines) == len(inputs), (cmd, len(lines), len(inputs))
    return [bytes.fromhex(l[1:]).decode("utf-8") for l in lines]


def show(s: str) -> str:
    return "".join(c if 0x20 <= ord(c) < 0x7F else f"\\u{{{ord(c):X}}}" for c in s)


def random_inputs(n: int, seed: int):
    rng = random.Random(seed)
    interesting = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                   0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8,
                   0xFB, 0xFC, 0xFE, 0xFF, 0xBB]
    out = []
    for _ in range(n):
        k = rng.randint(1, 12)
        out.append(bytes(rng.choice(interesting) if rng.random() < 0.7 else rng.randrange(256)
                         for _ in range(k)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--random", type=int, default=200_000, help="random byte strings to compare")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    rust = [rust_decoder()]
    node = ["node", os.path.join(SRC, "lossy.mjs")]
    node_v = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    rustc_v = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"python {sys.version.split()[0]}, node {node_v}, {rustc_v}\n")

    inputs = [b for _, b in CASES]
    py = [b.decode("utf-8", "replace") for b in inputs]
    rs = run_lines(rust, inputs)
    js = run_lines(node + ["default"], inputs)
    js_nobom = run_lines(node + ["ignoreBOM"], inputs)

    print("| case | bytes | python = rust = node(ignoreBOM) | node TextDecoder() default |")
    print("|---|---|---|---|")
    core_bad, bom_only = [], []
    for (label, b), p, r, j, jn in zip(CASES, py, rs, js, js_nobom):
        if p == r == jn:
            mid = show(p)
        else:
            mid = f"DIFFER: python {show(p)} / rust {show(r)} / node-ignoreBOM {show(jn)}"
            core_bad.append(label)
        if j == p:
            last = "same"
        else:
            last = show(j)
            bom_only.append(label)
        print(f"| {label} | {b.hex(' ') or '(empty)'} | {mid} | {last} |")

    rnd = random_inputs(args.random, args.seed)
    rpy = [b.decode("utf-8", "replace") for b in rnd]
    rrs = run_lines(rust, rnd)
    rjs = run_lines(node + ["default"], rnd)
    rjn = run_lines(node + ["ignoreBOM"], rnd)
    rnd_core = [b for b, p, r, jn in zip(rnd, rpy, rrs, rjn) if not (p == r == jn)]
    rnd_bom = [b for b, p, j in zip(rnd, rpy, rjs) if p != j]
    rnd_bom_other = [b for b in rnd_bom if not b.startswith(b"\xef\xbb\xbf")]

    print(f"\nrandom: {len(rnd)} byte strings (seed {args.seed}, 1-12 bytes, biased to lead/continuation "
          f"bytes): python vs rust vs node(ignoreBOM) differ on {len(rnd_core)}; node default differs "
          f"from python on {len(rnd_bom)} ({len(rnd_bom) - len(rnd_bom_other)} of them start with a BOM, "
          f"{len(rnd_bom_other)} do not)")
    for b in rnd_core[:10]:
        print("  e.g.", b.hex(" "))

    print()
    if not core_bad and not rnd_core:
        print("VERDICT: python bytes.decode('utf-8','replace'), rust String::from_utf8_lossy and node "
              "TextDecoder('utf-8', {ignoreBOM: true}) give identical strings on every case "
              f"({len(CASES)} listed + {len(rnd)} random): all replace each maximal invalid subpart "
              "with one U+FFFD.")
    else:
        print(f"VERDICT: DISAGREEMENT on {core_bad} and {len(rnd_core)} random inputs")
    if bom_only and not rnd_bom_other:
        print("         node's default new TextDecoder() (and fetch's Response.text()) differs only by "
              f"stripping one leading BOM (U+FEFF): cases {bom_only}. A JS host must use "
              "{ignoreBOM: true} to match.")
    elif bom_only or rnd_bom_other:
        print(f"         node default differs on {bom_only} and {len(rnd_bom_other)} random non-BOM inputs")
    sys.exit(1 if core_bad or rnd_core else 0)


if __name__ == "__main__":
    main()
