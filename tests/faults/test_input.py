"""Issue 9, defect 6: a date-time outside PostgreSQL's and Python's range once converted to UTC
(``0001-01-01T00:00:00+14:00`` is year 0, ``9999-12-31T23:59:59-23:59`` year 10000) is an
immediate ``invalid_request`` naming the argument — before, ``mail_wait``'s ``since`` crashed the
job on the worker with an asyncpg ``DataError``, the caller got ``unavailable`` after 17 s, and
the worker's traceback printed the value (spec section 7: arguments are never logged). The same
holds for ``mail_search``'s ``after`` and ``before`` and on REST. A job that fails on its worker
all the same (here: the bad ``since`` enqueued past the front's check, as a front without it
would) ends its call with the error envelope, and the worker logs the exception's type and
where it was raised — never a traceback, which printed the value."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import msgspec
from arq.connections import ArqRedis
from arq.jobs import Job, JobStatus

from shared.events import JOB_MAIL_WAIT, queue_name
from shared.ids import Prefix, new_id
from shared.mail.waiting import WaitRequest, filter_for
from tests.e2e.transport_kit import Wire, keyed_identity
from tests.faults.kit import eventually, no_traceback, stack_env, tool_error

BAD = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-23:59"]
#: Bound on the refusal: it is the front's, before any job or query.
REFUSED_SECONDS = 1.0


async def test_dates_out_of_range_are_refused_at_once_and_never_logged(
        db_url, conn, own_redis, services, http):
    _, identity_id, _, token = await keyed_identity(conn, "desk@acme.example")
    env = stack_env(db_url, own_redis.url)
    front, base, (worker,) = await services.stack(env)
    wire = Wire(http, f"{base}/mcp", token)
    calls = [(tool, {name: value, **extra}, name) for value in BAD
             for tool, name, extra in (("mail_wait", "since", {"timeout_seconds": 5}),
                                       ("mail_search", "after", {"q": "invoice"}),
                                       ("mail_search", "before", {"q": "invoice"}))]
    for tool, arguments, name in calls:
        for ask in (wire.legacy, wire.modern):
            began = time.monotonic()
            response, messages = await ask("tools/call", {"name": tool, "arguments": arguments})
            took = time.monotonic() - began
            assert response.status_code == 200, response.text
            error = tool_error(messages[-1])
            assert error is not None, messages
            assert error["code"] == "invalid_request" and error["details"]["path"] == name, error
            assert took <= REFUSED_SECONDS, f"{tool} {name}: refused after {took:.2f} s"
    for value in BAD:
        began = time.monotonic()
        rest = await http.get(f"{base}/v1/identities/{identity_id}/wait",
                              params={"since": value, "timeout": 5},
                              headers={"authorization": f"Bearer {token}"})
        assert time.monotonic() - began <= REFUSED_SECONDS
        assert rest.status_code == 400, rest.text
        error = msgspec.json.decode(rest.content)["error"]
        assert error["code"] == "invalid_request" and error["details"]["path"] == "since"

    # a well-formed wait still works, and nothing logged a value or a traceback
    response, messages = await wire.legacy("tools/call", {
        "name": "mail_wait", "arguments": {"since": "2026-01-01T00:00:00Z",
                                           "timeout_seconds": 1}})
    assert tool_error(messages[-1]) is None, messages
    for service in (front, worker):
        no_traceback(service)
        text = service.text()
        for value in BAD:
            assert value[:10] not in text, f"{service.name} logged {value}"



async def test_a_job_failing_on_its_worker_logs_no_argument_and_no_traceback(
        db_url, conn, own_redis, services):
    _, identity_id, _, _ = await keyed_identity(conn, "desk@acme.example")
    env = stack_env(db_url, own_redis.url)
    worker = await services.worker(env)
    since = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))  # BAD[0], decoded
    request = WaitRequest(identity_id=identity_id, since=since, timeout_seconds=2,
                          wanted=filter_for("any", from_=None, subject_contains=None,
                                            thread_id=None))
    job_id, queue = new_id(Prefix.REQUEST), queue_name(env["PM_NAMESPACE"], "interactive")
    arq = ArqRedis.from_url(own_redis.url)
    try:
        # as front.relay enqueues a call job: (job id, payload, seconds)
        await arq.enqueue_job(JOB_MAIL_WAIT, job_id, msgspec.json.encode(request), 2.0,
                              _job_id=job_id, _queue_name=queue)
        job = Job(job_id, arq, _queue_name=queue)

        async def complete() -> bool:
            return await job.status() is JobStatus.complete

        await eventually(complete, 10, "the job ends on the worker")
        outcome = (await job.result_info()).result
    finally:
        await arq.aclose()

    # the failure happened (PostgreSQL refused the date) and was logged without the value
    text = worker.text()
    for shown in ("0001-01-01", "datetime.datetime(1, 1, 1", "+14:00", "seconds=50400"):
        assert shown not in text, f"the worker logged the argument ({shown!r}):\n{text[-3000:]}"
    no_traceback(worker)
    [failed] = [line for line in worker.events("job_failed") if line["job_id"] == job_id]
    assert failed["exception"] == "DataError", failed
    # and the caller gets the retryable envelope, not silence
    assert isinstance(outcome, dict) and outcome["error"]["code"] == "unavailable", outcome
