"""Constants and helpers shared by the integration tests (the emulator account, tasks, its
request log). The fixture that starts the emulator is in conftest.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List

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


@dataclass
class RunningEmulator:
    """A started emulator: where it listens, its time scale, and its request log."""

    base_url: str
    time_scale: float

    def requests(self) -> List[Dict[str, Any]]:
        """The emulator's log of CaptchaAI requests (submits and polls, key redacted)."""
        reply = httpx.get(f"{self.base_url}/_emulator/requests", timeout=10)
        reply.raise_for_status()
        body = reply.json()
        return body["requests"] if isinstance(body, dict) else body

    def paths(self) -> List[str]:
        return [entry["path"] for entry in self.requests()]


def recaptcha_task(sitekey: str = SITEKEY) -> Dict[str, Any]:
    return {"type": "recaptcha_v2", "sitekey": sitekey, "pageurl": PAGE}


def turnstile_task(sitekey: str = "0x4AAAAAAABkMYinukE8nzY") -> Dict[str, Any]:
    return {"type": "turnstile", "sitekey": sitekey, "pageurl": PAGE}
