"""Dagster: assets that solve through CaptchaAIResource, materialized with dg.materialize against
the emulator; the pool sized from the plan; the unsolvable-ratio check; permanent failures not
retried. Needs dagster (target/venv-dagster, made by integrations.sh)."""


import concurrent.futures as cf

import pytest

import required

INSTALL = "run `bindings/python/integrations.sh dagster` (it makes target/venv-dagster and runs this file there)"
dg = required.module("dagster", INSTALL)

from captchaai_engine import UnsolvableError  # noqa: E402
from captchaai_engine.integrations.dagster import (  # noqa: E402
    POOL,
    CaptchaAIResource,
    ConfigurationError,
    SolveStats,
    plan_pool_limit,
    size_pool_to_plan,
    unsolvable_ratio_check,
)

from emulated import KEY, THREADS, UNKNOWN_KEY, UNSOLVABLE_SITEKEY, recaptcha_task, turnstile_task  # noqa: E402

REGIONS = ["north", "south", "east", "west"]
daily = dg.DailyPartitionsDefinition(start_date="2026-09-01")


def resource(emulator, key: str = KEY) -> CaptchaAIResource:
    return CaptchaAIResource(api_key=key, base_url=emulator.base_url, time_scale=emulator.time_scale)


@dg.asset(partitions_def=daily, pool=POOL, retry_policy=dg.RetryPolicy(max_retries=2, delay=0))
def portal_records(context: dg.AssetExecutionContext, captchaai: CaptchaAIResource) -> dg.MaterializeResult:
    """One solve per region (two at a time); the run config's ``unsolvable`` regions use a
    sitekey the emulator never solves."""
    unsolvable_regions = set(context.run.tags.get("unsolvable_regions", "").split(",")) - {""}
    stats = SolveStats()
    tasks = {region: turnstile_task(UNSOLVABLE_SITEKEY) if region in unsolvable_regions else recaptcha_task()
             for region in REGIONS}
    with cf.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {pool.submit(captchaai.solve, task): region for region, task in tasks.items()}
        for future in cf.as_completed(futures):
            try:
                solution = future.result()
            except UnsolvableError as error:
                stats.add_unsolvable(error)
                context.log.warning(f"{futures[future]}: unsolvable ({error.task_id})")
                continue
            except Exception:
                pool.shutdown(cancel_futures=True)  # regions not started yet never start
                raise
            assert solution.answer and solution.is_fresh(now=captchaai.solver().clock.now_ms() / 1000)
            context.log.info(f"{futures[future]}: captcha {solution.task_id} solved")
            stats.add(solution)
    return dg.MaterializeResult(metadata=stats.metadata())


unsolvable_ratio = unsolvable_ratio_check(portal_records)


def materialize(emulator, instance, key=KEY, unsolvable_regions=()):
    return dg.materialize([portal_records, unsolvable_ratio], resources={"captchaai": resource(emulator, key)},
                          partition_key="2026-09-01", instance=instance, raise_on_error=False,
                          tags={"unsolvable_regions": ",".join(unsolvable_regions)})


@pytest.fixture
def instance(tmp_path):
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        yield instance


def check_result(result):
    [evaluation] = result.get_asset_check_evaluations()
    return evaluation


def test_a_partition_materializes_and_the_check_passes(captchaai_emulator, instance):
    result = materialize(captchaai_emulator, instance)
    assert result.success
    metadata = result.asset_materializations_for_node("portal_records")[0].metadata
    assert metadata["solves"].value == 4 and metadata["unsolvable"].value == 0
    assert metadata["p95_solve_seconds"].value > 0
    assert check_result(result).passed
    assert captchaai_emulator.paths().count("/in.php") == 4


def test_one_unsolvable_region_in_four_is_within_the_ratio(captchaai_emulator, instance):
    result = materialize(captchaai_emulator, instance, unsolvable_regions=["east"])
    assert result.success
    metadata = result.asset_materializations_for_node("portal_records")[0].metadata
    assert metadata["solves"].value == 3 and metadata["unsolvable"].value == 1
    evaluation = check_result(result)
    assert evaluation.passed and evaluation.metadata["unsolvable_ratio"].value == 0.25


def test_too_many_unsolvable_regions_fail_the_blocking_check(captchaai_emulator, instance):
    result = materialize(captchaai_emulator, instance, unsolvable_regions=["east", "west"])
    evaluation = check_result(result)
    assert not evaluation.passed and evaluation.metadata["unsolvable_ratio"].value == 0.5
    assert not result.success  # a blocking check that fails fails the run


def test_a_permanent_failure_is_not_retried(captchaai_emulator, instance):
    result = materialize(captchaai_emulator, instance, key=UNKNOWN_KEY)
    assert not result.success
    events = result.all_events
    retries = [e for e in events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert retries == [], "Failure(allow_retries=False) must bypass the RetryPolicy"
    [failure] = [e for e in events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    info = failure.step_failure_data.user_failure_data
    assert info.metadata["code"].value == "ERROR_KEY_DOES_NOT_EXIST"
    assert UNKNOWN_KEY not in str(failure.step_failure_data.error)
    # The resource's solver reads the plan's threads first (its thread budget): the unknown key
    # fails there, so nothing is submitted, and no retry asks again.
    assert captchaai_emulator.paths().count("/in.php") == 0
    assert 1 <= captchaai_emulator.actions().count("threadsinfo") <= len(REGIONS)


def test_a_transient_failure_uses_the_retry_policy(start_emulator, instance):
    """No server at the base URL: the engine reports a transient failure, and Dagster retries."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    captchaai = CaptchaAIResource(api_key=KEY, base_url=f"http://127.0.0.1:{port}", time_scale=1000.0)
    result = dg.materialize([portal_records], resources={"captchaai": captchaai}, partition_key="2026-09-01",
                            instance=instance, raise_on_error=False)
    assert not result.success
    retries = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert len(retries) == 2
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    error = failure.step_failure_data.error
    assert "TransientError" in {error.cls_name, error.cause and error.cause.cls_name}, error


def test_the_pool_is_sized_to_the_plan_through_the_public_cli(captchaai_emulator, instance, tmp_path):
    """size_pool_to_plan runs `dagster instance concurrency set` on the instance in dagster_home
    (the fixture's instance lives in tmp_path); the reads below are the test's, not the module's."""
    limit = size_pool_to_plan(resource(captchaai_emulator), dagster_home=tmp_path, solves_per_step=2, spare=1)
    assert limit == (THREADS - 1) // 2
    assert instance.event_log_storage.get_concurrency_info(POOL).slot_count == limit
    assert captchaai_emulator.actions().count("threadsinfo") == 1
    # A materialization in the pool claims and frees a slot of it.
    assert materialize(captchaai_emulator, instance).success
    info = instance.event_log_storage.get_concurrency_info(POOL)
    assert info.slot_count == limit and info.active_slot_count == 0


def test_sizing_the_pool_needs_an_instance(captchaai_emulator, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with pytest.raises(ConfigurationError, match="DAGSTER_HOME"):
        size_pool_to_plan(resource(captchaai_emulator))
    assert plan_pool_limit(resource(captchaai_emulator), spare=0) == THREADS
    with pytest.raises(ConfigurationError, match="leaves no thread"):  # the engine's gate decides
        plan_pool_limit(resource(captchaai_emulator), spare=THREADS)
    with pytest.raises(ValueError):
        plan_pool_limit(resource(captchaai_emulator), solves_per_step=0)


solvers_seen: list = []


@dg.asset
def solver_lifecycle(captchaai: CaptchaAIResource) -> None:
    solver = captchaai.solver()
    solvers_seen.append(solver)
    assert not solver._client.is_closed, "setup_for_execution built an open solver"
    captchaai.solve(recaptcha_task())


def test_the_solver_lives_from_setup_to_teardown(captchaai_emulator, instance):
    solvers_seen.clear()
    captchaai = resource(captchaai_emulator)
    with pytest.raises(dg.DagsterInvariantViolationError):
        captchaai.solver()  # outside an execution there is none
    assert captchaai.threads_info().threads == THREADS  # a solver for the call only
    assert dg.materialize([solver_lifecycle], resources={"captchaai": captchaai}, instance=instance).success
    [solver] = solvers_seen
    assert solver._client.is_closed, "teardown_after_execution closed the solver"


def test_the_key_never_shows_in_the_resource_repr(captchaai_emulator):
    captchaai = resource(captchaai_emulator)
    assert KEY not in repr(captchaai) and KEY not in str(captchaai)
