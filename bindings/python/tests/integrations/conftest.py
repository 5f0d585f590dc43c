"""The emulator for every framework's integration test, built on the package's own emulator
fixture (``start_emulator`` in tests/conftest.py: ``$CAPTCHAAI_EMULATOR`` or
target/release/captchaai-emulator on a free loopback port, stopped at teardown).

Each framework's test runs in that framework's virtual environment (bindings/python/
integrations.sh names its file); the main run (test.sh) does not collect this folder. Without its
framework a module fails under ``CI=true`` and is skipped elsewhere (``required.module``).
"""

from __future__ import annotations

import httpx
import pytest

from emulated import KEY, THREADS, UNSOLVABLE_SITEKEY, RunningEmulator


@pytest.fixture
def example_emulator(start_emulator) -> RunningEmulator:
    """For the README's examples, which run as users run them, in real time: an emulator at time
    scale 1 with KEY (THREADS threads) and solves of 1-3 s, so a solve takes the engine's first
    wait for its type (13 s for Turnstile) plus a poll."""
    emulator = start_emulator("--key", f"{KEY}:{THREADS}", "--solve-time", "all=1000:3000",
                              "--ban-after-bad-keys", "0", time_scale=1.0)
    return RunningEmulator(base_url=emulator.base_url, time_scale=1.0)


@pytest.fixture
def captchaai_emulator(start_emulator) -> RunningEmulator:
    """An emulator with KEY (THREADS threads), solves of 3-6 s virtual time, tasks for
    UNSOLVABLE_SITEKEY unsolvable, and no IP ban for bad keys."""
    emulator = start_emulator("--key", f"{KEY}:{THREADS}", "--solve-time", "all=3000:6000",
                              "--unsolvable-sitekey", UNSOLVABLE_SITEKEY, "--ban-after-bad-keys", "0")
    health = httpx.get(f"{emulator.base_url}/_emulator/health", timeout=10).json()
    return RunningEmulator(base_url=emulator.base_url, time_scale=float(health["time_scale"]))
