#!/usr/bin/env python3
"""Runs every quick start in README.md, docs/*.md and the packages' READMEs (bindings/*/README.md),
so the docs cannot drift from the code.

Which fenced blocks run (docs/testing.md, "The docs check"):

- ``sh``/``bash``, ``python``, ``js`` and ``rust`` blocks run, unless their first line is a
  comment whose text starts with ``unchecked:`` and gives the reason.
- A ``rust`` block is the text of an example file its first line names (``examples/X.rs`` or
  ``CRATE/examples/X.rs``), with the command that runs it in backticks (``cargo run ...
  --example X``): the check fails if the file differs from the block or the command names
  another example, then runs the example.
- ``text``, ``json``, ``toml``, ``wit`` and ``http`` blocks are shown, never run. A block with
  no language, or another one, is an error.

How: the emulator (``$CAPTCHAAI_EMULATOR``, else target/release/captchaai-emulator) runs on 127.0.0.1 at a port it picks,
with ``--time-scale 10``; every block sees ``CAPTCHAAI_KEY`` (its account, 20 threads) and
``CAPTCHAAI_BASE_URL``. The ports 3000 and 8099 in a block are replaced with free ones. A block
that talks to ``127.0.0.1:3000`` (the edge) gets ``scripts/run.sh`` started first, on a free
port, with its own emulator and its state in a temporary SQLite file, under real Spin where the
tests find one (``$SPIN_BIN``, else ../shared/tools/spin/spin). First the check runs
``cargo build --workspace --examples --bins`` (the dev profile: what ``cargo test --workspace``
built, so it is cheap after that); rust blocks run their example from ``target/debug/examples``.
Shell blocks run from the repository root with ``target/venv-docs/bin`` and ``target/debug``
first on ``PATH`` (so ``captchaai`` is the workspace's); Python
blocks run in the venv ``target/venv-docs`` (created if missing; the README's install block
fills it). A JavaScript block's first line is a comment naming the file it is saved as
(``// solve.mjs ...``): the block runs as that file with ``node``, in a project made by
``npm init -y`` (so a ``.js`` file is CommonJS there, as in a user's new project) whose
``node_modules/captchaai-engine`` is the built ``bindings/js``. Each block
runs in its own process group with a time limit, and everything started is stopped at the end.
A failure names the block by file and line and shows the end of its output; the exit status is
1 if any block failed.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parent.parent
KEY = "0123456789abcdef0123456789abcdef"
RUN_LANGS = {"sh": "sh", "bash": "sh", "python": "python", "js": "js", "rust": "rust"}
SHOWN_LANGS = {"text", "json", "toml", "wit", "http"}
UNCHECKED = re.compile(r"^\s*(?:#|//!?)\s*unchecked:\s*(\S.*)$")
EXAMPLE = re.compile(r"((?:[\w.-]+/)*examples/[\w-]+\.rs)")
COMMAND = re.compile(r"`(cargo [^`]+)`")
JS_FILE = re.compile(r"^//\s*([\w.-]+\.(?:mjs|cjs|js))\b")
EDGE = "127.0.0.1:3000"
TIME_LIMIT_S = {"sh": 900, "python": 180, "js": 180, "rust": 1800}
RUN_SH_READY_S = int(os.environ.get("CHECK_DOCS_RUN_SH_READY_S", "1200"))
TAIL_LINES = 60


@dataclass
class Block:
    file: Path
    line: int  # of the opening fence, 1-based
    lang: str  # as written
    text: str

    @property
    def where(self) -> str:
        try:
            name = self.file.relative_to(ROOT)
        except ValueError:
            name = self.file
        return f"{name}:{self.line}"

    @property
    def kind(self) -> Optional[str]:
        return RUN_LANGS.get(self.lang)

    @property
    def first_line(self) -> str:
        return self.text.split("\n", 1)[0]

    @property
    def unchecked(self) -> Optional[str]:
        match = UNCHECKED.match(self.first_line)
        return match.group(1).strip() if match else None


def blocks_of(path: Path) -> List[Block]:
    """The fenced blocks of a Markdown file (fences of three or more backticks or tildes)."""
    blocks: List[Block] = []
    lines = path.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)(`{3,}|~{3,})(.*)$", lines[i])
        if not fence:
            i += 1
            continue
        indent, marker, info = fence.group(1), fence.group(2), fence.group(3).strip()
        start = i
        body: List[str] = []
        i += 1
        while i < len(lines) and not re.match(rf"^\s*{re.escape(marker[0])}{{{len(marker)},}}\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        if i == len(lines):
            raise SystemExit(f"{path}:{start + 1}: a fenced block is never closed")
        i += 1
        lang = info.split()[0].split(",")[0] if info else ""
        blocks.append(Block(path, start + 1, lang, "\n".join(body) + "\n"))
    return blocks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(process: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM to the process group, then SIGKILL after the grace."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


class Failed(Exception):
    pass


class Check:
    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.started: List[subprocess.Popen] = []
        self.ports = {"3000": str(free_port()), "8099": str(free_port())}
        self.venv = ROOT / "target" / "venv-docs"
        self.env = dict(os.environ)
        for name in ("EDGE_TOKEN", "EDGE_RUNTIME_CONFIG", "PORT", "EMULATOR_PORT"):
            self.env.pop(name, None)
        self.env["PATH"] = os.pathsep.join([str(self.venv / "bin"), str(ROOT / "target" / "debug"),
                                            self.env.get("PATH", "")])
        self.env["VIRTUAL_ENV"] = str(self.venv)
        self.env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.env["CAPTCHAAI_CACHE_DIR"] = str(scratch / "captchaai-cache")  # the CLI's, not ~/.cache
        self.run_sh: Optional[subprocess.Popen] = None
        self.built = False

    # -- servers ---------------------------------------------------------------------------

    def start_emulator(self) -> None:
        binary = Path(os.environ.get("CAPTCHAAI_EMULATOR") or ROOT / "target" / "release" / "captchaai-emulator")
        if not binary.is_file():
            raise Failed(f"{binary} is missing: build it first with `cargo build --release -p captchaai-emulator` "
                         "(or set CAPTCHAAI_EMULATOR)")
        log = open(self.scratch / "emulator.log", "w")
        process = subprocess.Popen([str(binary), "--port", "0", "--key", f"{KEY}:20", "--time-scale", "10"],
                                   stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True,
                                   start_new_session=True)
        self.started.append(process)
        assert process.stdout is not None
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and process.poll() is None:
            line = process.stdout.readline()
            if line:
                break
        prefix = "emulator listening on "
        if not line.startswith(prefix):
            raise Failed(f"the emulator did not report its address within 30 s (got {line!r})")
        self.env["CAPTCHAAI_KEY"] = KEY
        self.env["CAPTCHAAI_BASE_URL"] = line[len(prefix):].strip()
        print(f"docs check: emulator at {self.env['CAPTCHAAI_BASE_URL']} (time scale 10)", flush=True)

    def start_run_sh(self) -> None:
        """scripts/run.sh on a free port, with its own emulator and a temporary store."""
        if self.run_sh is not None:
            if self.run_sh.poll() is not None:
                raise Failed("scripts/run.sh exited earlier (see its log above)")
            return
        config = self.scratch / "runtime-config.toml"
        config.write_text(f'[key_value_store.default]\ntype = "spin"\npath = "{self.scratch / "edge-kv.db"}"\n')
        env = dict(self.env)
        for name in ("CAPTCHAAI_KEY", "CAPTCHAAI_BASE_URL"):
            env.pop(name, None)  # run.sh's default: its own emulator
        env.update(PORT=self.ports["3000"], EMULATOR_PORT=str(free_port()), EDGE_RUNTIME_CONFIG=str(config))
        # Real Spin where the tests find it ($SPIN_BIN, else ../shared/tools/spin/spin): run.sh
        # then serves under it, as on a machine with Spin installed, and skips the release build
        # of the bundled host (about 8 minutes on 2 cores).
        shared_spin = ROOT.parent / "shared" / "tools" / "spin" / "spin"
        if "SPIN_BIN" not in env and shared_spin.is_file():
            env["SPIN_BIN"] = str(shared_spin)
        log_path = self.scratch / "run.sh.log"
        print(f"docs check: starting scripts/run.sh on 127.0.0.1:{self.ports['3000']} (log: {log_path})", flush=True)
        log = open(log_path, "w")
        self.run_sh = subprocess.Popen(["bash", "scripts/run.sh"], cwd=ROOT, env=env, stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.started.append(self.run_sh)
        url = f"http://127.0.0.1:{self.ports['3000']}/healthz"
        deadline = time.monotonic() + RUN_SH_READY_S
        while time.monotonic() < deadline:
            if self.run_sh.poll() is not None:
                raise Failed(f"scripts/run.sh exited with status {self.run_sh.returncode} before serving:\n"
                             + tail(log_path))
            try:
                with urllib.request.urlopen(url, timeout=2) as reply:
                    if reply.status == 200:
                        print("docs check: scripts/run.sh is serving", flush=True)
                        return
            except OSError:
                pass
            time.sleep(1)
        raise Failed(f"scripts/run.sh did not answer {url} within {RUN_SH_READY_S} s:\n" + tail(log_path))

    def build(self) -> None:
        """The workspace's binaries and examples in the dev profile: the artifacts
        `cargo test --workspace` already built (same packages, same features), so this is cheap
        after it. Shell blocks find `captchaai` here; rust blocks run their example from here."""
        if self.built:
            return
        print("docs check: cargo build --workspace --examples --bins", flush=True)
        log_path = self.scratch / "cargo-build.log"
        with open(log_path, "w") as log:
            status = subprocess.run(["cargo", "build", "--workspace", "--examples", "--bins"], cwd=ROOT,
                                    env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    timeout=TIME_LIMIT_S["rust"]).returncode
        if status != 0:
            raise Failed("cargo build --workspace --examples --bins failed:\n" + tail(log_path))
        self.built = True

    def stop_all(self) -> None:
        for process in reversed(self.started):
            stop_group(process)
        self.started.clear()

    # -- blocks ----------------------------------------------------------------------------

    def with_ports(self, text: str) -> str:
        return re.sub(r"(?<=[:\s=])(3000|8099)\b", lambda m: self.ports[m.group(1)], text)

    def run(self, block: Block) -> None:
        kind = block.kind
        assert kind is not None
        if kind == "rust":
            self.run_rust(block)
            return
        if EDGE in block.text:
            self.start_run_sh()
        if kind == "sh":
            self.build()
        path = self.scratch / f"block-{block.line}"
        cwd = ROOT
        if kind == "sh":
            path = path.with_suffix(".sh")
            path.write_text("set -eo pipefail\n" + self.with_ports(block.text))
            command = ["bash", str(path)]
        elif kind == "python":
            path = path.with_suffix(".py")
            path.write_text(self.with_ports(block.text))
            command = [str(self.venv / "bin" / "python"), str(path)]
            cwd = self.scratch
        else:  # js: saved as the file its first line names, in a default `npm init -y` project
            name = JS_FILE.match(block.first_line)
            if not name:
                raise Failed("a js block's first line must name the file it is saved as, e.g. `// solve.mjs`")
            project = self.js_project()
            path = project / name.group(1)
            path.write_text(self.with_ports(block.text))
            command = ["node", name.group(1)]
            cwd = project
        self.execute(block, command, cwd)

    def js_project(self) -> Path:
        """A project as a user starts one (``npm init -y``: its package.json says nothing of
        ES modules), with the built bindings/js as ``node_modules/captchaai-engine``."""
        project = self.scratch / "js-project"
        if not project.is_dir():
            project.mkdir()
            status = subprocess.run(["npm", "init", "-y"], cwd=project, env=self.env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, timeout=120)
            if status.returncode != 0:
                raise Failed(f"npm init -y failed: {status.stderr.strip()}")
            (project / "node_modules").mkdir()
            (project / "node_modules" / "captchaai-engine").symlink_to(ROOT / "bindings" / "js", target_is_directory=True)
        return project

    def run_rust(self, block: Block) -> None:
        example = EXAMPLE.search(block.first_line)
        command = COMMAND.search(block.first_line)
        if not example or not command:
            raise Failed("a rust block's first line must name its example file (examples/X.rs) and the "
                         "command that runs it in backticks")
        path = ROOT / example.group(1)
        if not path.is_file():
            raise Failed(f"{example.group(1)} does not exist: a rust block is the text of that file")
        actual = path.read_text(encoding="utf-8")
        if actual != block.text:
            diff = difflib.unified_diff(block.text.splitlines(True), actual.splitlines(True),
                                        f"{block.where} (the block)", example.group(1))
            raise Failed("the block differs from its example file:\n" + "".join(diff))
        stem = path.stem
        package = package_of(path)
        words = command.group(1).split()
        if f"--example {stem}" not in command.group(1) or (
                path.parent.parent != ROOT and package not in words):
            raise Failed(f"the command `{command.group(1)}` does not run the example {stem} of {package}")
        self.build()
        self.execute(block, [str(ROOT / "target" / "debug" / "examples" / stem)], ROOT)

    def ensure_venv(self) -> None:
        if not (self.venv / "bin" / "pip").exists():
            print(f"docs check: creating {self.venv}", flush=True)
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(self.venv)], check=True)

    def execute(self, block: Block, command: List[str], cwd: Path) -> None:
        kind = block.kind or "sh"
        limit = TIME_LIMIT_S[kind]
        log_path = self.scratch / f"block-{block.line}.log"
        with open(log_path, "w") as log:
            process = subprocess.Popen(command, cwd=cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                status = process.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                status = None
            finally:
                stop_group(process, grace_s=5)  # what the block left running (`&`) too
        if status is None:
            raise Failed(f"did not finish within {limit} s:\n" + tail(log_path))
        if status != 0:
            raise Failed(f"exit status {status}:\n" + tail(log_path))


def package_of(example: Path) -> str:
    """The package whose examples/ holds this file."""
    manifest = (example.parent.parent / "Cargo.toml").read_text(encoding="utf-8")
    match = re.search(r'^\[package\][^\[]*?^name\s*=\s*"([^"]+)"', manifest, re.M | re.S)
    if not match:
        raise Failed(f"no package name in {example.parent.parent / 'Cargo.toml'}")
    return match.group(1)


def tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").rstrip("\n").split("\n")
    except OSError:
        return "    (no output)"
    return "\n".join("    " + line for line in lines[-TAIL_LINES:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md, docs/*.md, bindings/*/README.md)")
    parser.add_argument("--list", action="store_true", help="list the blocks and what happens to each; run nothing")
    args = parser.parse_args()
    files = [f.resolve() for f in args.files] or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                                                  *sorted((ROOT / "bindings").glob("*/README.md"))]

    errors: List[str] = []
    to_run: List[Block] = []
    skipped: List[Block] = []
    for path in files:
        for block in blocks_of(path):
            if not block.lang:
                errors.append(f"{block.where}: a fenced block without a language (say `text` for one that is not run)")
            elif block.lang in SHOWN_LANGS:
                continue
            elif block.kind is None:
                errors.append(f"{block.where}: unknown block language `{block.lang}` (run: "
                              f"{', '.join(sorted(RUN_LANGS))}; shown only: {', '.join(sorted(SHOWN_LANGS))})")
            elif block.unchecked is not None:
                skipped.append(block)
            else:
                to_run.append(block)

    stems = {}
    for block in to_run:
        found = EXAMPLE.search(block.first_line) if block.kind == "rust" else None
        if found:
            other = stems.setdefault(Path(found.group(1)).stem, found.group(1))
            if other != found.group(1):
                errors.append(f"{block.where}: examples {other} and {found.group(1)} share a name; "
                              "target/debug/examples holds one of them")
    if args.list:
        for block in to_run:
            print(f"run        {block.where} ({block.lang})")
        for block in skipped:
            print(f"unchecked  {block.where} ({block.lang}): {block.unchecked}")
        for error in errors:
            print(f"error      {error}")
        return 1 if errors else 0
    for error in errors:
        print(f"FAIL {error}", flush=True)

    failures = len(errors)
    ran = 0
    with tempfile.TemporaryDirectory(prefix="check-docs-") as scratch_dir:
        check = Check(Path(scratch_dir))

        def on_signal(signum: int, _frame: object) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        signal.signal(signal.SIGTERM, on_signal)
        try:
            check.ensure_venv()  # before any block: `pip` in a shell block must be the venv's
            check.start_emulator()
            for block in to_run:
                started = time.monotonic()
                ran += 1
                try:
                    check.run(block)
                except Failed as failure:
                    failures += 1
                    print(f"FAIL {block.where} ({block.lang} block): {failure}", flush=True)
                else:
                    print(f"ok   {block.where} ({block.lang} block, {time.monotonic() - started:.1f} s)", flush=True)
        except Failed as failure:
            failures += 1
            print(f"FAIL docs check: {failure}", flush=True)
        except KeyboardInterrupt:
            print("docs check: interrupted", flush=True)
            failures += 1
        finally:
            check.stop_all()
    for block in skipped:
        print(f"skip {block.where} ({block.lang} block, unchecked: {block.unchecked})")
    print(f"docs check: {ran} of {len(to_run)} blocks run, {failures} failed, {len(skipped)} unchecked", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
