"""The job runner (workers/runner.py): the registry becomes arq functions under their own names
on namespaced queues, and a call job publishes ``started``, its progress and exactly one
``result`` or ``error`` — whatever the domain code does — on real Redis and PostgreSQL."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from shared.control import Control, Stopped
from shared.deepsearch import BuiltinBackend
from shared.events import (JOB_DEEP_SEARCH, JOB_EMBED, JOB_MAIL_WAIT, JobEvent, cancel_key,
                           job_channel, new_mail_channel, queue_name, workers_key)
from shared.jobs import DEADLINE_GRACE_SECONDS, JOBS, JobEnv, JobSpec
from shared.logs import configure
from shared.pubsub import Subscriptions
from shared.search.semantic import SemanticEngine
from tests.conftest import NAMESPACE, database, settings_for
from workers.process import drain_job_id
from workers.runner import JobControl, _call_job, functions


def test_each_job_is_an_arq_function_named_by_the_registry_on_its_queue():
    for queue in ("interactive", "batch"):
        made = functions(queue)
        assert [f.name for f in made] == [j.name for j in JOBS if j.queue == queue]
        for f in made:
            job = next(j for j in JOBS if j.name == f.name)
            # The runner's coroutines share one qualname ("run"): the name must be explicit.
            assert f.coroutine.__qualname__ != f.name
            assert f.timeout_s == job.deadline_seconds + 2 * DEADLINE_GRACE_SECONDS
            assert f.max_tries == 1
            # A drain job's fixed id must be free again as soon as a run ends.
            assert f.keep_result_s == (0 if job.payload is None else 60)
    assert {JOB_MAIL_WAIT, JOB_DEEP_SEARCH} <= {f.name for f in functions("interactive")}
    assert JOB_EMBED in {f.name for f in functions("batch")}


def test_queues_worker_sets_and_drain_ids_carry_the_namespace():
    for make in (lambda ns: queue_name(ns, "interactive"), lambda ns: queue_name(ns, "batch"),
                 lambda ns: workers_key(ns, "interactive"), lambda ns: drain_job_id(ns, JOB_EMBED)):
        assert make("one") != make("two")


class Payload(msgspec.Struct):
    behaviour: str


class Answer(msgspec.Struct):
    value: int


async def behave(env: JobEnv, payload: Payload, control: Control) -> Answer:
    await control.progress(1, 2, "one")
    if payload.behaviour == "raise":
        raise RuntimeError("a bug")
    if payload.behaviour == "slow":
        await asyncio.sleep(60)
    if payload.behaviour == "checkpoint":
        while True:
            await control.checkpoint()
            await asyncio.sleep(0.05)
    return Answer(value=7)


SPEC = JobSpec(name="test_behave", queue="interactive", run=behave, deadline_seconds=5,
               payload=Payload)


@pytest.fixture
async def env(db_url, redis):
    async with database(db_url) as db:
        yield JobEnv(db=db, redis=redis, settings=settings_for(db_url),
                     new_mail=Subscriptions(redis, new_mail_channel("*"), bytes),
                     engine=SemanticEngine("hash", 1), backend=BuiltinBackend())


async def run_job(env: JobEnv, redis, behaviour: str, seconds: float, *, cancel: bool = False):
    """Run one call job the way arq would, and return its outcome and every event it published."""
    job_id = f"req_test_{behaviour}_{id(env)}"
    pubsub = redis.pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(job_channel(job_id))
    if cancel:
        await redis.set(cancel_key(job_id), b"1", ex=30)
    try:
        outcome = await _call_job(SPEC)({"env": env, "worker_id": "w1"}, job_id,
                                        msgspec.json.encode(Payload(behaviour)), seconds)
        events = []
        # Everything was published before the job returned; read for a second. get_message
        # answers None at once for a swallowed subscribe confirmation (STACK.md section 3), so
        # None does not mean quiet.
        loop = asyncio.get_running_loop()
        until = loop.time() + 1.0
        while loop.time() < until:
            if (message := await pubsub.get_message(timeout=0.1)) is not None:
                events.append(msgspec.json.decode(message["data"], type=JobEvent))
        return job_id, outcome, events
    finally:
        await pubsub.aclose()


async def test_a_result_is_published_and_returned(env, redis):
    _, outcome, events = await run_job(env, redis, "ok", 5)
    assert outcome == {"result": {"value": 7}}
    assert [e.kind for e in events] == ["started", "progress", "result"]
    assert events[0].worker == "w1" and events[-1].result == {"value": 7}


@pytest.mark.parametrize(("behaviour", "seconds", "says"), [
    ("raise", 5, "failed on its worker"), ("slow", 0.2, "did not finish within 0.2 s")])
async def test_a_job_that_raises_or_overruns_ends_with_a_retryable_error(env, redis, behaviour,
                                                                      seconds, says):
    started = asyncio.get_running_loop().time()
    _, outcome, events = await run_job(env, redis, behaviour, seconds)
    # bound: the call's seconds plus the runner's grace, and a little for the events
    assert asyncio.get_running_loop().time() - started < seconds + DEADLINE_GRACE_SECONDS + 1.5
    assert outcome["error"]["code"] == "unavailable" and says in outcome["error"]["message"]
    assert [e.kind for e in events] == ["started", "progress", "error"]
    assert events[-1].error == outcome["error"]


async def test_a_cancelled_job_stops_at_its_checkpoint_and_publishes_nothing_more(env, redis):
    job_id, outcome, events = await run_job(env, redis, "checkpoint", 5, cancel=True)
    assert outcome is None
    assert [e.kind for e in events] == ["started", "progress"]
    with pytest.raises(Stopped):
        await JobControl(env, job_id, 5).checkpoint()


async def test_a_job_aborted_from_outside_still_writes_its_job_line(env, redis, capsys):
    """arq's abort (the front stopping a job a worker already runs) and a worker's shutdown
    cancel the job's task: the job still writes its ``job`` line, with no argument in it, and
    the cancellation goes on to arq (before, such a job left no line at all)."""
    configure("info")  # JSON lines on stderr, as a worker process writes them
    job_id = f"req_test_aborted_{id(env)}"
    task = asyncio.create_task(_call_job(SPEC)({"env": env, "worker_id": "w1"}, job_id,
                                               msgspec.json.encode(Payload("slow")), 5))
    await asyncio.sleep(0.3)
    capsys.readouterr()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    lines = [msgspec.json.decode(line) for line in capsys.readouterr().err.splitlines()
             if line.startswith("{")]
    assert [(line["event"], line["job_id"], line["outcome"]) for line in lines] == [
        ("job", job_id, "aborted")]
    assert "slow" not in str(lines) and lines[0]["duration_ms"] >= 300


async def test_drain_ticks_never_pile_up_behind_a_busy_worker(db_url, redis):
    """Two batch processes tick every second while no worker takes the job (a long run holds
    the only slot): one drain job waits in the queue, not one per tick (issue 8: 207 did)."""
    from workers.process import _tick

    settings = settings_for(db_url, pm_namespace=f"{NAMESPACE}-ticks", pm_embed_poll_seconds=1)
    queue = queue_name(settings.pm_namespace, "batch")
    tickers = [asyncio.create_task(_tick(redis, settings)) for _ in range(2)]
    try:
        await asyncio.sleep(3.5)
    finally:
        for ticker in tickers:
            ticker.cancel()
        await asyncio.gather(*tickers, return_exceptions=True)
    try:
        assert await redis.zcard(queue) == len([j for j in JOBS if j.queue == "batch"])
    finally:
        for job in JOBS:
            await redis.delete(f"arq:job:{drain_job_id(settings.pm_namespace, job.name)}")
        await redis.delete(queue)


async def test_a_worker_stopped_during_start_up_shuts_down_cleanly(db_url, redis):
    """Stopped before it ever polled (the suite once failed on KeyError: 'pool' at shutdown)."""
    from workers.process import serve

    settings = settings_for(db_url, pm_namespace=f"{NAMESPACE}-early")
    stop = asyncio.Event()
    stop.set()
    async with asyncio.timeout(15):
        await serve(settings, "interactive", stop)
    assert await redis.zcard(workers_key(settings.pm_namespace, "interactive")) == 0
