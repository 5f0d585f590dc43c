"""Constants and helpers shared by the integration tests (the emulator account, tasks, its
request log). The fixture that starts the emulator is in conftest.py."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

#: A 32-character key with an active plan on the emulator, and its thread count.
KEY = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
THREADS = 4
#: A key the emulator does not know (CaptchaAI answers ERROR_KEY_DOES_NOT_EXIST): a permanent failure.
UNKNOWN_KEY = "ffffffffffffffffffffffffffffffff"
#: Tasks with this sitekey end unsolvable on the emulator.
UNSOLVABLE_SITEKEY = "0x4AAAAAAAUnsolvableSitekeyXX"
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
PAGE = "https://portal.example.com/export"
#: The README's examples (bindings/python/examples).
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass
class RunningEmulator:
    """A started emulator: where it listens, its time scale, and its request log."""

    base_url: str
    time_scale: float

    def requests(self) -> list[dict[str, Any]]:
        """The emulator's log of CaptchaAI requests (submits and polls, key redacted)."""
        reply = httpx.get(f"{self.base_url}/_emulator/requests", timeout=10)
        reply.raise_for_status()
        body = reply.json()
        return body["requests"] if isinstance(body, dict) else body

    def paths(self) -> list[str]:
        return [entry["path"] for entry in self.requests()]

    def actions(self) -> list[Any]:
        """Each request's ``action`` (``threadsinfo``, ``get``, ...; None for a submit)."""
        return [entry.get("action") for entry in self.requests()]


def recaptcha_task(sitekey: str = SITEKEY) -> dict[str, Any]:
    return {"type": "recaptcha_v2", "sitekey": sitekey, "pageurl": PAGE}


def turnstile_task(sitekey: str = "0x4AAAAAAABkMYinukE8nzY") -> dict[str, Any]:
    return {"type": "turnstile", "sitekey": sitekey, "pageurl": PAGE}


def load_example(name: str) -> ModuleType:
    """``bindings/python/examples/<name>.py`` imported afresh, as its framework would (it reads
    the environment at import, as a user's file does)."""
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"captchaai_example_{name}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
