"""The outbound drain jobs of shared.jobs on real PostgreSQL and Redis: the purge of expired
idempotency keys runs at most once an hour however often it is ticked."""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from shared.deepsearch import BuiltinBackend
from shared.events import JOB_PURGE_SEND_KEYS, new_mail_channel, ran_key
from shared.jobs import JOBS_BY_NAME, JobEnv
from shared.pubsub import Subscriptions
from shared.search.semantic import SemanticEngine
from shared.tenancy.store import create_identity, create_tenant
from tests.conftest import NAMESPACE, database, settings_for


async def test_expired_keys_are_purged_once_an_hour(db_url, conn: asyncpg.Connection, redis):
    tenant = await create_tenant(conn, "acme")
    identity = await create_identity(conn, tenant.id, "desk@acme.example")
    for key, hours in (("old", 25), ("fresh", 1)):
        await conn.execute(
            "INSERT INTO send_requests (identity_id, idempotency_key, request_hash, created_at)"
            " VALUES ($1, $2, '\\x00', now() - $3::interval)", identity.id, key,
            timedelta(hours=hours))
    settings = settings_for(db_url, pm_namespace=f"{NAMESPACE}-purge")
    marker = ran_key(settings.pm_namespace, JOB_PURGE_SEND_KEYS)
    await redis.delete(marker)
    purge = JOBS_BY_NAME[JOB_PURGE_SEND_KEYS]
    try:
        async with database(db_url) as db:
            env = JobEnv(db=db, redis=redis, settings=settings,
                         new_mail=Subscriptions(redis, new_mail_channel("*"), bytes),
                         engine=SemanticEngine("hash", 1), backend=BuiltinBackend())
            assert await purge.run(env) == 1
            await conn.execute(
                "UPDATE send_requests SET created_at = now() - interval '30 hours'")
            assert await purge.run(env) == 0  # ticked again within the hour: not run
        assert 3500 < await redis.ttl(marker) <= 3600
        assert await conn.fetchval("SELECT idempotency_key FROM send_requests") == "fresh"
    finally:
        await redis.delete(marker)
