"""Airflow 3: the trigger's run() against the emulator, and the operator through defer and resume
in Airflow's in-process runner (dag.test runs the trigger in line). Needs apache-airflow-core
(target/venv-airflow, made by integrations.sh)."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import timedelta

import pytest

import required

# Airflow reads its home and database when first imported: a throwaway one for this module.
_HOME = tempfile.mkdtemp(prefix="airflow-home-")
os.environ["AIRFLOW_HOME"] = _HOME
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_HOME}/airflow.db"

INSTALL = "run `bindings/python/integrations.sh airflow` (it makes target/venv-airflow and runs this file there)"
required.module("airflow.sdk", INSTALL)

from airflow.sdk import DAG  # noqa: E402
from airflow.sdk.exceptions import AirflowException, AirflowFailException  # noqa: E402
from airflow.utils.state import TaskInstanceState  # noqa: E402

from captchaai_engine import Config, Solver  # noqa: E402
from captchaai_engine.integrations._common import clock_for  # noqa: E402
from captchaai_engine.integrations.airflow import (  # noqa: E402
    DEFER_MARGIN,
    CaptchaAISolveOperator,
    CaptchaAITrigger,
    plan_threads,
)

from emulated import KEY, THREADS, UNKNOWN_KEY, UNSOLVABLE_SITEKEY, recaptcha_task, turnstile_task  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def airflow_db():
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.utils import db

    db.initdb()
    DagBundlesManager().sync_bundles_to_db()


@pytest.fixture
def connection(monkeypatch, captchaai_emulator):
    """The ``captchaai`` connection: the key in the password, the emulator in the extra."""

    def set_connection(key: str = KEY, conn_id: str = "captchaai") -> None:
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({
            "conn_type": "generic", "password": key,
            "extra": {"config": {"base_url": captchaai_emulator.base_url},
                      "time_scale": captchaai_emulator.time_scale}}))

    set_connection()
    return set_connection


async def first_event(trigger: CaptchaAITrigger):
    events = [event.payload async for event in trigger.run()]
    assert len(events) == 1, events
    return events[0]


def fresh_snapshot(emulator, task, key: str = KEY) -> str:
    """A solve created but not yet submitted, as a snapshot (the trigger then does all of it)."""
    with Solver(key, Config(base_url=emulator.base_url), clock=clock_for(emulator.time_scale)) as solver:
        return solver.start(task).snapshot()


def test_serialize_carries_the_snapshot_and_never_the_key(captchaai_emulator):
    import importlib

    trigger = CaptchaAITrigger(fresh_snapshot(captchaai_emulator, recaptcha_task()), conn_id="other")
    classpath, kwargs = trigger.serialize()
    assert set(kwargs) == {"snapshot", "conn_id"}
    assert KEY not in json.dumps(kwargs) and KEY not in repr(trigger)
    module, name = classpath.rsplit(".", 1)
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    with pytest.raises(ValueError):
        CaptchaAITrigger("")


async def test_trigger_run_solves_from_the_snapshot(captchaai_emulator, connection):
    payload = await first_event(CaptchaAITrigger(fresh_snapshot(captchaai_emulator, recaptcha_task())))
    assert payload["status"] == "solved"
    solution = payload["solution"]
    assert solution["answer"] and solution["task_id"] and solution["type"] == "recaptcha_v2"
    assert KEY not in json.dumps(payload)
    paths = captchaai_emulator.paths()
    assert paths[0] == "/in.php" and paths.count("/in.php") == 1 and "/res.php" in paths


async def test_trigger_run_reports_an_unsolvable_captcha(captchaai_emulator, connection):
    payload = await first_event(CaptchaAITrigger(
        fresh_snapshot(captchaai_emulator, turnstile_task(UNSOLVABLE_SITEKEY))))
    assert payload["status"] == "failed"
    assert payload["failure"]["class"] == "unsolvable" and payload["failure"]["task_id"]


async def test_trigger_run_reports_a_permanent_failure_without_the_key(captchaai_emulator, connection):
    connection(UNKNOWN_KEY)
    payload = await first_event(CaptchaAITrigger(fresh_snapshot(captchaai_emulator, recaptcha_task(), UNKNOWN_KEY)))
    assert payload["status"] == "failed" and payload["failure"]["class"] == "permanent"
    assert UNKNOWN_KEY not in json.dumps(payload)


class RecordingSolveOperator(CaptchaAISolveOperator):
    """Uses the token the way a real subclass would (returns a result, never the token), and
    records each visit of the worker in ``calls`` (the test runs in this process)."""

    calls: list = []

    def execute_complete(self, context, event):
        type(self).calls.append(("execute_complete", event["status"]))
        return super().execute_complete(context, event)

    def use_token(self, context, solution):
        type(self).calls.append(("use_token", solution.task_id, bool(solution.answer)))
        return {"captcha_task_id": solution.task_id}


def register(dag: DAG) -> None:
    """Stores the serialized Dag the way the Dag processor does (dag.test() runs stored Dags)."""
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    bag = DagBag(dag_folder=os.path.join(_HOME, "no-dags"), collect_dags=False)
    bag.bag_dag(dag)
    sync_bag_to_db(bag, "dags-folder", None)


def run_dag(task_kwargs: dict, *, retries: int = 0):
    RecordingSolveOperator.calls = []
    with DAG(dag_id="captchaai_test", schedule=None, catchup=False) as dag:
        RecordingSolveOperator(task_id="solve", retries=retries, retry_delay=0, **task_kwargs)
    register(dag)
    run = dag.test()
    return run.get_task_instance("solve")


def test_the_operator_defers_and_resumes_under_dag_test(captchaai_emulator, connection):
    ti = run_dag({"task": recaptcha_task(), "deferrable": True, "max_token_age": 60})
    assert ti.state == TaskInstanceState.SUCCESS
    calls = RecordingSolveOperator.calls
    assert calls[0] == ("execute_complete", "solved"), calls
    assert calls[1][0] == "use_token" and calls[1][1] and calls[1][2]
    # Submitted once by the worker; the trigger resumed the same CaptchaAI task (polls only).
    paths = captchaai_emulator.paths()
    assert paths[0] == "/in.php" and paths.count("/in.php") == 1 and paths.count("/res.php") >= 1


def test_the_operator_solves_in_the_worker_when_not_deferrable(captchaai_emulator, connection):
    ti = run_dag({"task": turnstile_task(), "deferrable": False})
    assert ti.state == TaskInstanceState.SUCCESS
    assert [c[0] for c in RecordingSolveOperator.calls] == ["use_token"]


def test_a_permanent_failure_fails_the_task_without_retries(captchaai_emulator, connection):
    connection(UNKNOWN_KEY)
    ti = run_dag({"task": recaptcha_task(), "deferrable": True}, retries=2)
    assert ti.state == TaskInstanceState.FAILED
    assert ti.try_number == 1, "a permanent failure must not be retried"
    assert RecordingSolveOperator.calls == []


def test_an_invalid_task_fails_the_task_without_retries(captchaai_emulator, connection):
    ti = run_dag({"task": {"type": "recaptcha_v2", "pageurl": "not a url"}, "deferrable": True}, retries=2)
    assert ti.state == TaskInstanceState.FAILED and ti.try_number == 1
    assert captchaai_emulator.paths() == [], "an invalid task is refused before anything is sent"


async def test_execute_complete_checks_freshness_and_failure_classes(captchaai_emulator, connection):
    solved = await first_event(CaptchaAITrigger(fresh_snapshot(captchaai_emulator, recaptcha_task())))
    operator = RecordingSolveOperator(task_id="t", task=recaptcha_task(), max_token_age=3600)
    RecordingSolveOperator.calls = []
    assert operator.execute_complete({}, solved) == {"captcha_task_id": solved["solution"]["task_id"]}

    too_old = RecordingSolveOperator(task_id="u", task=recaptcha_task(), max_token_age=0)
    with pytest.raises(AirflowException) as stale:
        too_old.execute_complete({}, solved)
    assert not isinstance(stale.value, AirflowFailException)
    assert solved["solution"]["answer"] not in str(stale.value)

    unsolvable = await first_event(CaptchaAITrigger(
        fresh_snapshot(captchaai_emulator, turnstile_task(UNSOLVABLE_SITEKEY))))
    with pytest.raises(AirflowException) as retryable:
        operator.execute_complete({}, unsolvable)
    assert not isinstance(retryable.value, AirflowFailException)

    connection(UNKNOWN_KEY)
    permanent = await first_event(CaptchaAITrigger(fresh_snapshot(captchaai_emulator, recaptcha_task(), UNKNOWN_KEY)))
    with pytest.raises(AirflowFailException):
        operator.execute_complete({}, permanent)


def test_plan_threads_sizes_the_pool_and_refuses_an_unknown_key(captchaai_emulator, connection):
    assert plan_threads() == THREADS
    connection(UNKNOWN_KEY)
    with pytest.raises(AirflowFailException) as refused:
        plan_threads()
    assert UNKNOWN_KEY not in str(refused.value)


def test_plan_threads_reads_a_connection_stored_in_the_database(captchaai_emulator):
    """Outside a task (a shell sizing the pool) the Task SDK does not read the metadata database;
    plan_threads still finds a connection stored there (``airflow connections add``)."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    with create_session() as session:
        session.add(Connection(conn_id="captchaai_in_db", conn_type="generic", password=KEY, extra=json.dumps({
            "config": {"base_url": captchaai_emulator.base_url}, "time_scale": captchaai_emulator.time_scale})))
    assert plan_threads("captchaai_in_db") == THREADS


async def test_an_explicit_defer_timeout_is_airflows_backstop(captchaai_emulator, connection):
    import asyncio

    from airflow.sdk.exceptions import TaskDeferred

    operator = CaptchaAISolveOperator(task_id="t", task=recaptcha_task(), deferrable=True,
                                      defer_timeout=timedelta(minutes=7))
    with pytest.raises(TaskDeferred) as deferred:
        await asyncio.to_thread(operator.execute, {})
    assert deferred.value.timeout == timedelta(minutes=7)


async def test_a_restarted_trigger_resumes_the_same_captchaai_task(captchaai_emulator, connection):
    """execute() submits and defers; the trigger it defers to, run twice from its serialized
    kwargs (a triggerer restart), polls the one submitted task and never submits again."""
    import asyncio
    import importlib

    from airflow.sdk.exceptions import TaskDeferred

    operator = RecordingSolveOperator(task_id="t", task=recaptcha_task(), deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        await asyncio.to_thread(operator.execute, {})
    assert captchaai_emulator.paths() == ["/in.php"], "execute() submits, then defers before any poll"
    # Airflow's backstop: the real time left until the engine's deadline (reCAPTCHA v2: 120 s,
    # on the emulator's scaled clock), plus the margin; never shorter than the engine may take.
    deadline = timedelta(seconds=clock_for(captchaai_emulator.time_scale).seconds(120_000))
    assert DEFER_MARGIN < deferred.value.timeout <= DEFER_MARGIN + deadline, deferred.value.timeout
    classpath, kwargs = deferred.value.trigger.serialize()
    module, name = classpath.rsplit(".", 1)
    first = await first_event(getattr(importlib.import_module(module), name)(**kwargs))
    again = await first_event(getattr(importlib.import_module(module), name)(**kwargs))
    assert first["status"] == again["status"] == "solved"
    assert first["solution"]["task_id"] == again["solution"]["task_id"]
    assert captchaai_emulator.paths().count("/in.php") == 1


async def test_a_trigger_that_cannot_read_its_connection_hands_the_solve_back(captchaai_emulator, connection,
                                                                              monkeypatch):
    """A triggerer without the connection (another machine's environment): the trigger yields
    the snapshot back instead of failing, and the worker, which reads the connection, finishes the
    paid solve: the one submitted task is collected."""
    import asyncio

    from airflow.sdk.exceptions import TaskDeferred

    operator = RecordingSolveOperator(task_id="t", task=recaptcha_task(), deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        await asyncio.to_thread(operator.execute, {})
    monkeypatch.delenv("AIRFLOW_CONN_CAPTCHAAI")
    event = await first_event(deferred.value.trigger)
    assert event == {"status": "connection_unreadable", "snapshot": deferred.value.trigger.snapshot}
    connection()
    RecordingSolveOperator.calls = []
    result = await asyncio.to_thread(operator.execute_complete, {}, event)
    assert result["captcha_task_id"] and RecordingSolveOperator.calls[-1][0] == "use_token"
    assert captchaai_emulator.paths().count("/in.php") == 1, "the same task, polled by the worker"


def test_the_operator_submits_nothing_when_the_trigger_would_not_read_its_connection(captchaai_emulator,
                                                                                     connection, monkeypatch):
    """execute() reads the connection the way the trigger will before it submits; here that read
    (replaced: a triggerer that lacks the connection, then one that sees another definition)
    fails or differs, so the task fails without retries and nothing is sent."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    from captchaai_engine.integrations import airflow as integration

    async def missing(conn_id):
        raise AirflowNotFoundException(f"The conn_id `{conn_id}` isn't defined")

    async def shadowed(conn_id):
        return Connection(conn_id=conn_id, conn_type="generic", password=UNKNOWN_KEY)

    operator = CaptchaAISolveOperator(task_id="t", task=recaptcha_task(), deferrable=True)
    monkeypatch.setattr(integration, "_trigger_connection", missing)
    with pytest.raises(AirflowFailException, match="could not read the connection 'captchaai'.*nothing was submitted"):
        operator.execute({})
    monkeypatch.setattr(integration, "_trigger_connection", shadowed)
    with pytest.raises(AirflowFailException, match="differently") as differs:
        operator.execute({})
    assert UNKNOWN_KEY not in str(differs.value) and KEY not in str(differs.value)
    assert captchaai_emulator.paths() == []

