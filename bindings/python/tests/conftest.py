"""Shared fixtures: the repository root and the CaptchaAI emulator as a child process.

The emulator is ``$CAPTCHAAI_EMULATOR`` (a path), else ``target/release/captchaai-emulator``
(``cargo build --release -p captchaai-emulator``). It listens on 127.0.0.1 on a port it picks
(port 0) and prints ``emulator listening on http://127.0.0.1:PORT``; it is stopped at teardown.
A missing emulator fails the test under ``CI=true`` and skips it elsewhere (``required.py``).
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import required  # noqa: E402  (found through the path above)

#: The framework tests run in their own venvs, and integrations.sh names each file; a run over
#: tests/ (test.sh) does not collect them, so it reports no skip for a framework it cannot have.
collect_ignore = ["integrations"]

ROOT = Path(__file__).resolve().parents[3]
KEY = "0123456789abcdef0123456789abcdef"
#: Virtual time runs this many times faster on both sides (emulator and Clock).
TIME_SCALE = 50.0
STARTUP_TIMEOUT_S = 20.0


def emulator_path() -> Path:
    env = os.environ.get("CAPTCHAAI_EMULATOR")
    path = Path(env) if env else ROOT / "target" / "release" / "captchaai-emulator"
    return required.file("the emulator", path,
                         "build it with `cargo build --release -p captchaai-emulator` or set CAPTCHAAI_EMULATOR")


class Emulator:
    """A running emulator process; ``base_url`` is where it listens."""

    def __init__(self, args: list[str]) -> None:
        self.process = subprocess.Popen([str(emulator_path()), *args], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        lines: queue.Queue[str] = queue.Queue()

        def pump() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                lines.put(line)

        threading.Thread(target=pump, daemon=True).start()
        try:
            line = lines.get(timeout=STARTUP_TIMEOUT_S)
        except queue.Empty:
            self.stop()
            raise RuntimeError("the emulator did not report its address in time") from None
        prefix = "emulator listening on "
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError(f"unexpected emulator output: {line!r}")
        self.base_url = line[len(prefix):].strip()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def start_emulator() -> Iterator:
    """Starts emulators with extra flags (seed preset; time scale TIME_SCALE unless given); all
    stopped at teardown."""
    started: list[Emulator] = []

    def start(*flags: str, time_scale: float = TIME_SCALE) -> Emulator:
        emulator = Emulator(["--port", "0", "--seed", "7", "--time-scale", str(time_scale), *flags])
        started.append(emulator)
        return emulator

    yield start
    for emulator in started:
        emulator.stop()


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    """One emulator per test module: account KEY with 5 threads, solves of 6-9 s (virtual)."""
    emulator = Emulator(["--port", "0", "--seed", "7", "--time-scale", str(TIME_SCALE), "--key", f"{KEY}:5",
                         "--solve-time", "all=6000:9000"])
    yield emulator
    emulator.stop()
