"""Prefect 3: a flow whose tasks solve through the integration against the emulator, on a
temporary Prefect server and home (prefect_test_harness; nothing global is touched): the global
concurrency limit as the thread budget (created from the plan on first use), retries refused for
permanent failures and configuration errors, transient ones retried. Needs prefect
(target/venv-prefect, made by integrations.sh)."""

from __future__ import annotations

import itertools
import os
import tempfile

import pytest

import required

os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="prefect-home-")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

INSTALL = "run `bindings/python/integrations.sh prefect` (it makes target/venv-prefect and runs this file there)"
required.module("prefect", INSTALL)

from prefect import flow  # noqa: E402
from prefect.blocks.system import Secret  # noqa: E402
from prefect.client.orchestration import get_client  # noqa: E402
from prefect.testing.utilities import prefect_test_harness  # noqa: E402

from captchaai_engine import Config, PermanentError, TransientError  # noqa: E402
from captchaai_engine.integrations.prefect import (  # noqa: E402
    LIMIT,
    ConfigurationError,
    captchaai_task,
    size_limit_to_plan,
    solve,
)

from emulated import KEY, THREADS, UNKNOWN_KEY, recaptcha_task  # noqa: E402

REGIONS = ["north", "south", "east", "west"]
ATTEMPTS: list = []


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    # The temporary server shares 2 cores with four other frameworks in CI: a hang guard, not a speed.
    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture
def secret():
    def save(key: str) -> None:
        Secret(value=key).save("captchaai-api-key", overwrite=True)

    save(KEY)
    return save


def set_limit(size: int) -> None:
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(LIMIT, size)


@captchaai_task(retries=2, retry_delay_seconds=0)
def export_region(region: str, base_url: str, time_scale: float) -> dict:
    """What a real task does: solve, use the token at once, return the result (never the token)."""
    ATTEMPTS.append(region)
    solution = solve(recaptcha_task(), config=Config(base_url=base_url), time_scale=time_scale,
                     timeout_seconds=120)
    assert solution.answer
    return {"region": region, "task_id": solution.task_id,
            "span": (solution.submitted_at, solution.solved_at)}


@flow
def portal_flow(base_url: str, time_scale: float) -> list:
    futures = [export_region.submit(region, base_url, time_scale) for region in REGIONS]
    return [future.result() for future in futures]


@flow
def one_region(base_url: str, time_scale: float):
    """Runs one region's task and returns its failure (the task's state must be failed)."""
    state = export_region(REGIONS[0], base_url, time_scale, return_state=True)
    assert state.is_failed(), state
    return state.result(raise_on_failure=False)


def test_a_flow_run_solves_each_region_within_the_thread_budget(captchaai_emulator, secret):
    set_limit(1)
    results = portal_flow(captchaai_emulator.base_url, captchaai_emulator.time_scale)
    assert sorted(r["region"] for r in results) == sorted(REGIONS)
    assert all(r["task_id"] for r in results)
    assert captchaai_emulator.paths().count("/in.php") == 4
    # One slot: no two solves were ever in flight at once (times from the solvers' shared clock).
    spans = sorted(r["span"] for r in results)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, f"two solves overlapped under a limit of 1: {spans}"


def test_a_permanent_failure_is_not_retried(captchaai_emulator, secret):
    set_limit(THREADS)
    secret(UNKNOWN_KEY)
    ATTEMPTS.clear()

    error = one_region(captchaai_emulator.base_url, captchaai_emulator.time_scale)
    assert isinstance(error, PermanentError)
    assert error.code == "ERROR_KEY_DOES_NOT_EXIST" and UNKNOWN_KEY not in repr(error)
    assert ATTEMPTS == [REGIONS[0]], "retries=2, but a permanent failure must run once"


def test_a_transient_failure_is_retried(secret):
    import socket

    set_limit(THREADS)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    ATTEMPTS.clear()

    assert isinstance(one_region(f"http://127.0.0.1:{port}", 1000.0), TransientError)
    assert ATTEMPTS == [REGIONS[0]] * 3


def test_the_limit_is_sized_to_the_plan(captchaai_emulator, secret):
    size = size_limit_to_plan(config=Config(base_url=captchaai_emulator.base_url),
                              time_scale=captchaai_emulator.time_scale, spare=1)
    assert size == THREADS - 1
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name(LIMIT).limit == THREADS - 1
    with pytest.raises(ConfigurationError, match="leaves no thread"):  # the engine's gate decides
        size_limit_to_plan(config=Config(base_url=captchaai_emulator.base_url),
                           time_scale=captchaai_emulator.time_scale, spare=THREADS)


def test_a_missing_limit_is_a_configuration_error_when_not_created(captchaai_emulator, secret):
    with pytest.raises(ConfigurationError) as refused:
        solve(recaptcha_task(), config=Config(base_url=captchaai_emulator.base_url),
              time_scale=captchaai_emulator.time_scale, limit="no-such-limit", create_limit=False)
    assert "no-such-limit" in str(refused.value) and "prefect gcl create" in str(refused.value)
    assert captchaai_emulator.paths() == []


def test_a_missing_limit_is_created_from_the_plan_on_first_use(captchaai_emulator, secret):
    solution = solve(recaptcha_task(), config=Config(base_url=captchaai_emulator.base_url),
                     time_scale=captchaai_emulator.time_scale, limit="made-on-first-use", spare=2)
    assert solution.answer
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name("made-on-first-use").limit == THREADS - 2
    # threadsinfo once, then the solve; a second solve finds the limit and sizes nothing.
    solve(recaptcha_task(), config=Config(base_url=captchaai_emulator.base_url),
          time_scale=captchaai_emulator.time_scale, limit="made-on-first-use")
    assert captchaai_emulator.actions().count("threadsinfo") == 1
    assert captchaai_emulator.paths().count("/in.php") == 2


@captchaai_task(retries=2, retry_delay_seconds=0)
def misconfigured(block: str) -> None:
    ATTEMPTS.append(block)
    solve(recaptcha_task(), secret_block=block)


@flow
def misconfigured_flow(block: str):
    state = misconfigured(block, return_state=True)
    assert state.is_failed(), state
    return state.result(raise_on_failure=False)


def test_a_missing_secret_block_is_a_configuration_error_and_not_retried():
    ATTEMPTS.clear()
    error = misconfigured_flow("no-such-block")
    assert isinstance(error, ConfigurationError) and "no-such-block" in str(error)
    assert ATTEMPTS == ["no-such-block"], "retries=2, but a configuration error must run once"


def test_an_invalid_task_is_permanent_and_not_retried(captchaai_emulator, secret):
    @captchaai_task(retries=2, retry_delay_seconds=0)
    def bad_task() -> None:
        ATTEMPTS.append("bad")
        solve({"type": "recaptcha_v2", "pageurl": "not a url"}, config=Config(base_url=captchaai_emulator.base_url))

    @flow
    def bad_flow():
        return bad_task(return_state=True).result(raise_on_failure=False)

    ATTEMPTS.clear()
    error = bad_flow()
    assert isinstance(error, PermanentError) and error.field in ("sitekey", "pageurl")
    assert ATTEMPTS == ["bad"]
    assert captchaai_emulator.paths() == []
