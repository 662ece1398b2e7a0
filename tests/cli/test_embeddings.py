"""``pylota embeddings status`` and the import summary's embedding line, as a user runs them
(issue 14): per identity embedded / total, the queue, the rate and the time left."""

from __future__ import annotations

import msgspec

from shared.db import open_database
from shared.embeddings.embedder import HashEmbedder
from shared.embeddings.store import embed_pending
from tests.e2e.harness import pylota


async def test_status_and_the_import_summary_say_how_long_embedding_takes(db_url, conn,
                                                                         monkeypatch) -> None:
    monkeypatch.setenv("PM_EMBEDDER", "hash")
    monkeypatch.setenv("PM_EMBED_BATCH", "3")  # the workers' batch, as embed_pending runs below
    assert pylota(db_url, "tenants", "create", "acme").returncode == 0
    identity = pylota(db_url, "identities", "create", "--tenant", "acme", "--address",
                      "desk@pylota.example").stdout.strip()
    done = pylota(db_url, "import", "--identity", "desk@pylota.example", "--no-progress",
                  "demo/brightwell.mbox")
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("embedding: 8 of the identity's 8 message(s) wait for the batch "
                           "workers")
    assert "under a minute" in last and "`pylota embeddings status`" in last

    status = pylota(db_url, "embeddings", "status")
    assert status.returncode == 0, status.stderr
    header, row = status.stdout.splitlines()
    assert header.split() == ["identity", "address", "embedded", "/", "total", "queued", "rate",
                              "time", "left"]
    assert row.split()[:6] == [identity, "desk@pylota.example", "0", "/", "8", "8"]
    assert row.endswith("under a minute")

    pool = await open_database(db_url, size=2, acquire_seconds=5)
    try:
        # Three batches: the rate is measured between batches, so a lone batch gives none.
        assert await embed_pending(pool, HashEmbedder(), batch=3) == 8
    finally:
        await pool.close()
    as_json = pylota(db_url, "embeddings", "status", "--identity", "desk@pylota.example", "--json")
    found = msgspec.json.decode(as_json.stdout)
    assert (found["embedded"], found["total"], found["queued"]) == (8, 8, 0)
    assert found["per_second"] > 0 and found["seconds_left"] == 0
    assert pylota(db_url, "embeddings", "status").stdout.splitlines()[1].endswith("done")

    again = pylota(db_url, "import", "--identity", identity, "--no-progress",
                   "demo/brightwell.mbox")
    assert again.stdout.splitlines()[-1] == "embedding: 8 of 8 message(s) searchable by meaning"

    monkeypatch.setenv("PM_EMBEDDER", "off")
    off = pylota(db_url, "embeddings", "status")
    assert off.returncode == 2 and "PM_EMBEDDER is off" in off.stderr
    unknown = pylota(db_url, "embeddings", "status", "--identity", "nobody@x.example")
    assert unknown.returncode == 2


def test_prepare_builds_the_int8_model_into_the_cache_folder(db_url, monkeypatch, tmp_path) -> None:
    from shared.embeddings.quantized import MODEL

    monkeypatch.setenv("PM_MODEL_CACHE", str(tmp_path / "models"))
    done = pylota(db_url, "embeddings", "prepare")
    assert done.returncode == 0, done.stderr
    name, path = done.stdout.split()
    assert name == MODEL and path.startswith(str(tmp_path / "models"))
    assert (tmp_path / "models" / path.rsplit("/", 1)[1]).stat().st_size > 10_000_000

    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("PM_MODEL_CACHE", str(tmp_path / "a-file" / "models"))
    refused = pylota(db_url, "embeddings", "prepare")
    assert refused.returncode == 2 and "PM_MODEL_CACHE" in refused.stderr
