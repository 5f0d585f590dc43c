"""The README's Airflow example (examples/airflow_dag.py) as a user runs it: the file unchanged in a
fresh Airflow home's Dags folder, the ``captchaai`` connection (key in its password) and the
``captchaai`` pool (the plan's threads less one, deferred tasks included) set up as the README
says, and ``dag.test()`` (what ``python airflow_dag.py`` calls) run in real time against the
emulator: each login submitted by the worker, awaited by the trigger, its result in XCom. Needs
apache-airflow-core (target/venv-airflow, made by integrations.sh)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest

import required

# Airflow reads its home and database when first imported: a throwaway one, unless test_airflow.py
# (collected first) made one already, which this module then shares.
_HOME = os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{_HOME}/airflow.db")

INSTALL = "run `bindings/python/integrations.sh airflow` (it makes target/venv-airflow and runs this file there)"
required.module("airflow.sdk", INSTALL)

from airflow.utils.state import DagRunState, TaskInstanceState  # noqa: E402

from emulated import EXAMPLES, KEY, THREADS, load_example  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def airflow_db():
    from airflow import settings
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.utils import db

    os.makedirs(settings.DAGS_FOLDER, exist_ok=True)  # $AIRFLOW_HOME/dags: the bundle dag.test() syncs
    shutil.copy(EXAMPLES / "airflow_dag.py", settings.DAGS_FOLDER)
    db.initdb()
    DagBundlesManager().sync_bundles_to_db()


def test_the_example_dag_defers_each_login_and_reports(example_emulator, monkeypatch):
    from airflow.models.pool import Pool
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from captchaai_engine.integrations.airflow import plan_threads

    # The README's setup: the connection (here as an environment variable) and the pool.
    monkeypatch.setenv("AIRFLOW_CONN_CAPTCHAAI", json.dumps({
        "conn_type": "generic", "password": KEY,
        "extra": {"config": {"base_url": example_emulator.base_url}}}))
    Pool.create_or_update_pool("captchaai", plan_threads() - 1, "CaptchaAI threads", include_deferred=True)

    example = load_example("airflow_dag")
    run = example.portal_logins_dag.test()

    assert run.state == DagRunState.SUCCESS
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert {task_id: ti.state for task_id, ti in tis.items()} == {
        "log_in_north": TaskInstanceState.SUCCESS, "log_in_south": TaskInstanceState.SUCCESS,
        "report": TaskInstanceState.SUCCESS}
    assert all(tis[t].try_number == 1 for t in ("log_in_north", "log_in_south"))
    assert tis["log_in_north"].pool == "captchaai"
    with create_session() as session:
        xcoms = {x.task_id: XComModel.deserialize_value(x) for x in session.scalars(
            XComModel.get_many(run_id=run.run_id, key="return_value", dag_ids="portal_logins",
                               task_ids=["log_in_north", "log_in_south"]))}
    assert set(xcoms) == {"log_in_north", "log_in_south"}
    assert all(x["captcha_task_id"] and x["solved_in_ms"] > 0 for x in xcoms.values())
    # One threadsinfo (the pool's size), then each login submitted once by the worker and
    # polled by its trigger; the pool as the README sizes it.
    assert example_emulator.actions().count("threadsinfo") == 1
    assert example_emulator.paths().count("/in.php") == 2
    assert Pool.get_pool("captchaai").slots == THREADS - 1
    assert KEY not in json.dumps(xcoms)
