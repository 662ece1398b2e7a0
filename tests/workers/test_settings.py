"""Worker settings keep deployments that share one Redis apart (PM_NAMESPACE)."""

from shared.config import Settings
from workers.settings import batch_worker_settings, worker_settings


def test_queues_and_cron_names_carry_the_namespace():
    one, two = Settings(pm_namespace="one"), Settings(pm_namespace="two")
    assert worker_settings(one)["queue_name"] != worker_settings(two)["queue_name"]
    first, second = batch_worker_settings(one), batch_worker_settings(two)
    assert first["queue_name"] != second["queue_name"]
    assert {c.name for c in first["cron_jobs"]}.isdisjoint(c.name for c in second["cron_jobs"])
