"""mail_list_threads and mail_update_labels on real data (spec section 4.3), and thread ids that
last after a merge: filters, the needs-reply score against ``is:needs_reply``, archiving, keyset
cursors while mail arrives, the section 4.2 budgets at their boundaries, and a label change seen
at once by search (``label:``, ``is:unread``, the label facet) and by the listing."""

from __future__ import annotations

import jsonschema
import msgspec
import pytest

from shared.auth.keys import authenticate, create_key
from shared.auth.permissions import Permission
from shared.budget import RESULT_BYTES
from shared.db import open_database
from shared.errors import ErrorCode, PylotaError
from shared.ingest.pipeline import ingest_raw
from shared.mail.store import MessageFilter, first_matching
from shared.tenancy.store import create_identity, create_tenant
from shared.tools import labels, search, threads
from shared.tools.call import decode_arguments
from shared.tools.context import ToolContext
from shared.tools.registry import TOOLS
from tests.conftest import settings_for
from tests.shared.search.conftest import mail

OWN = "desk@acme.example"
SPEC = {t.name: t for t in TOOLS}


@pytest.fixture
async def box(db_url, conn, redis):
    acme = await create_tenant(conn, "acme")
    desk = await create_identity(conn, acme.id, OWN)
    sales = await create_identity(conn, acme.id, "sales@acme.example")
    pool = await open_database(db_url, size=4, acquire_seconds=5)
    _, token = await create_key(conn, tenant_id=acme.id, identity_id=desk.id,
                                permissions=list(Permission))
    ctx = ToolContext(db=pool, redis=redis, settings=settings_for(db_url),
                      principal=await authenticate(conn, f"Bearer {token}"), request_id="req_t")
    ids: dict[str, str] = {}

    async def add(mid: str, identity_id: str = desk.id, **kwargs) -> str:
        outcome, _ = await ingest_raw(conn, None, identity_id, mail(mid, **kwargs))
        ids[mid] = outcome.message_id
        return outcome.thread_id

    yield {"ctx": ctx, "desk": desk, "sales": sales, "add": add, "ids": ids, "conn": conn}
    await pool.close()


def day(n: int, hour: int = 10) -> str:
    return f"{['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'][(n - 2) % 7]}, {n:02d} Nov 2026 {hour:02d}:00:00 +0000"


async def listing(ctx, **arguments) -> dict:
    """mail_list_threads through the call pipeline's decoding, as a client sees it, checked
    against the published outputSchema."""
    spec = SPEC["mail_list_threads"]
    result = await threads.run_list(ctx, decode_arguments(spec, arguments))
    body = msgspec.to_builtins(result)
    jsonschema.validate(body, spec.output_schema)
    return body


async def relabel(ctx, **arguments) -> dict:
    spec = SPEC["mail_update_labels"]
    body = msgspec.to_builtins(await labels.run(ctx, decode_arguments(spec, arguments)))
    jsonschema.validate(body, spec.output_schema)
    return body


async def found(ctx, q: str) -> dict:
    result = await search.run(ctx, search.SearchArgs(q=q, mode="keyword", limit=25))
    return msgspec.to_builtins(result)


async def conversations(box) -> dict[str, str]:
    add = box["add"]
    return {
        # a person asks us, in To, a question: 0.5 + 0.2 + 0.1
        "ask": await add("ask@x", sender="Jo <jo@brightwell.example>", subject="Invoice 42",
                         body="Could you pay invoice 42 by Friday?", date=day(2)),
        # a newsletter: automated
        "news": await add("news@x", sender="news@shop.example", subject="Deals",
                          body="Big deals this week.", date=day(3),
                          headers={"List-Unsubscribe": "<mailto:u@shop.example>"}),
        # we had the last word
        "done": await add("done@x", sender="bo@client.example", subject="Lunch",
                          body="Lunch on Friday.", date=day(4)),
        # urgent, only in Cc, no question: 0.5 + 0.2
        "cc": await add("cc@x", sender="al@client.example", to="team@client.example",
                        subject="URGENT: keys", body="The keys are at the front desk.",
                        date=day(6), headers={"Cc": OWN}),
    }


async def test_threads_newest_first_with_fields_and_filters(box):
    ctx, add = box["ctx"], box["add"]
    t = await conversations(box)
    assert await add("done-reply@x", sender=OWN, to="bo@client.example", subject="Re: Lunch",
                     body="See you there.", date=day(5), in_reply_to="done@x") == t["done"]
    page = await listing(ctx)
    assert [s["id"] for s in page["data"]] == [t["cc"], t["done"], t["news"], t["ask"]]
    assert page["next_cursor"] is None and "truncated" not in page
    by_id = {s["id"]: s for s in page["data"]}
    ask, done, cc = by_id[t["ask"]], by_id[t["done"]], by_id[t["cc"]]
    assert ask["needs_reply"] == 0.8 and cc["needs_reply"] == 0.7
    assert by_id[t["news"]]["needs_reply"] == 0.1 and done["needs_reply"] == 0
    assert ask["participants"] == [{"address": "jo@brightwell.example", "name": "Jo"}]
    assert [p["address"] for p in cc["participants"]] == ["al@client.example",
                                                          "team@client.example"]
    assert (done["message_count"], done["unread_count"], done["last_direction"]) == (2, 1, "outbound")
    assert done["last_message_id"] == box["ids"]["done-reply@x"]
    assert done["subject"] == "Lunch" and done["snippet"] == "See you there."
    assert done["last_message_at"] == "2026-11-05T10:00:00Z"
    assert ask["category"] == "billing" and by_id[t["news"]]["category"] == "newsletter"
    assert done["category"] is not None  # its inbound message's, not our reply's
    assert ask["labels"] == [] and ask["archived"] is False

    async def ids(**filters) -> list[str]:
        return [s["id"] for s in (await listing(ctx, **filters))["data"]]

    # needs_reply_gte 0.5 lists exactly the threads whose newest message is:needs_reply
    needing = {h["thread_id"] for h in (await found(ctx, "is:needs_reply"))["hits"]}
    assert set(await ids(needs_reply_gte=0.5)) == needing == {t["ask"], t["cc"]}
    assert await ids(needs_reply_gte=0.8) == [t["ask"]]
    assert await ids(needs_reply_gte=0) == await ids()
    assert await ids(direction="outbound") == [t["done"]]
    assert await ids(direction="inbound") == [t["cc"], t["news"], t["ask"]]
    assert await ids(category="billing") == [t["ask"]]
    assert await ids(after="2026-11-05T10:00:00Z") == [t["cc"], t["done"]]  # on or after
    assert await ids(before="2026-11-05T10:00:00Z") == [t["news"], t["ask"]]  # strictly before
    # swapped bounds are refused, as mail_search refuses them, not an empty page
    for after, before in [("2026-11-06T00:00:00Z", "2026-11-05T00:00:00Z"),
                          ("2026-11-05T10:00:00Z", "2026-11-05T12:00:00+02:00")]:
        with pytest.raises(PylotaError) as caught:
            await listing(ctx, after=after, before=before)
        assert (caught.value.code, caught.value.details["path"]) == (ErrorCode.INVALID_REQUEST, "after")
        assert "is not before before" in caught.value.message and "Swap" in caught.value.fix
    assert await ids(is_unread=False) == []
    assert set(await ids(is_unread=True)) == set(t.values())
    # the REST query string: values read from their text forms
    spec = SPEC["mail_list_threads"]
    assert decode_arguments(spec, {"needs_reply_gte": "0.5", "is_unread": "true",
                                   "limit": "5"}, from_query=True).needs_reply_gte == 0.5


async def test_labels_and_read_state_are_seen_at_once(box):
    ctx, add, conn = box["ctx"], box["add"], box["conn"]
    t = await conversations(box)
    ask = box["ids"]["ask@x"]
    state = await relabel(ctx, message_id=ask, labels_add=["handled", "claims:2026"], read=True)
    assert state == {"id": ask, "labels": ["handled", "claims:2026"], "read": True}
    again = await relabel(ctx, message_id=ask, labels_add=["handled", "zeta"])
    assert again["labels"] == ["handled", "claims:2026", "zeta"]  # kept in order, once
    assert (await found(ctx, "label:handled"))["hits"][0]["message_id"] == ask
    unread = {h["message_id"] for h in (await found(ctx, "is:unread"))["hits"]}
    assert ask not in unread and len(unread) == 3
    facet = {f["value"]: f["count"] for f in (await found(ctx, "is:read"))["facets"]["label"]}
    assert facet == {"handled": 1, "claims:2026": 1, "zeta": 1}
    listed = await listing(ctx, label="handled")
    assert [s["id"] for s in listed["data"]] == [t["ask"]]
    assert listed["data"][0]["unread_count"] == 0
    assert listed["data"][0]["labels"] == ["claims:2026", "handled", "zeta"]

    removed = await relabel(ctx, message_id=ask, labels_remove=["zeta", "never-there"], read=False)
    assert removed == {"id": ask, "labels": ["handled", "claims:2026"], "read": False}
    assert ask in {h["message_id"] for h in (await found(ctx, "is:unread"))["hits"]}

    # a whole thread: every message, and the thread's union
    await add("lunch-2@x", sender="bo@client.example", subject="Re: Lunch", body="Or Saturday?",
              date=day(7), in_reply_to="done@x")
    whole = await relabel(ctx, thread_id=t["done"], labels_add=["archived"], read=True)
    assert whole == {"id": t["done"], "labels": ["archived"], "read": True}
    assert await conn.fetchval("SELECT bool_and('archived' = any(labels) AND read) FROM messages"
                               " WHERE thread_id = $1", t["done"])
    assert t["done"] not in [s["id"] for s in (await listing(ctx))["data"]]
    archived = (await listing(ctx, archived=True))["data"]
    assert [s["id"] for s in archived] == [t["done"]] and archived[0]["archived"] is True
    # a new message brings an archived conversation back
    await add("lunch-3@x", sender="bo@client.example", subject="Re: Lunch", body="Well?",
              date=day(8), in_reply_to="done@x")
    back = (await listing(ctx))["data"][0]
    assert (back["id"], back["archived"], back["unread_count"]) == (t["done"], False, 1)
    assert back["labels"] == ["archived"]
    mixed = await relabel(ctx, thread_id=t["done"], labels_remove=["archived"])
    assert mixed == {"id": t["done"], "labels": [], "read": False}


async def test_update_labels_refuses_what_changes_nothing_and_other_identities_mail(box):
    ctx, add = box["ctx"], box["add"]
    await conversations(box)
    ask = box["ids"]["ask@x"]
    elsewhere = await add("s@x", identity_id=box["sales"].id, to="sales@acme.example")

    async def code_path(**arguments) -> tuple[str, object]:
        with pytest.raises(PylotaError) as caught:
            await relabel(ctx, **arguments)
        return caught.value.code.value, caught.value.details.get("path")

    assert await code_path(message_id=ask) == ("invalid_request", "labels_add")
    assert await code_path(message_id=ask, labels_add=[], labels_remove=[]) == (
        "invalid_request", "labels_add")
    assert await code_path(labels_add=["x"]) == ("invalid_request", "message_id")
    assert await code_path(message_id=ask, thread_id=elsewhere, read=True) == (
        "invalid_request", "thread_id")
    assert await code_path(message_id=ask, labels_add=["x"], labels_remove=["x"]) == (
        "invalid_request", "labels_remove")
    assert await code_path(message_id=ask, labels_add=["Bad Label"]) == (
        "invalid_request", "labels_add[0]")
    assert await code_path(message_id=ask, labels_add=[f"l{n}" for n in range(65)]) == (
        "invalid_request", "labels_add")
    assert await code_path(message_id=box["ids"]["s@x"], read=True) == ("message_not_found", None)
    assert await code_path(thread_id=elsewhere, read=True) == ("thread_not_found", None)
    assert await code_path(message_id="msg_" + "0" * 26, read=True) == ("message_not_found", None)
    # at most 64 labels on a message: the call that would pass it changes nothing
    full = await relabel(ctx, message_id=ask, labels_add=[f"l{n}" for n in range(64)])
    assert len(full["labels"]) == 64
    assert await code_path(message_id=ask, labels_add=["one-more"], read=True) == (
        "invalid_request", "labels_add")
    assert (await relabel(ctx, message_id=ask, labels_add=["one-more"],
                          labels_remove=["l0"]))["labels"][-1] == "one-more"
    assert (await relabel(ctx, message_id=ask, read=True))["read"] is True


async def test_cursor_pages_stay_stable_while_mail_arrives(box):
    ctx, add = box["ctx"], box["add"]
    made = [await add(f"t{n}@x", subject=f"Topic {n}", body="Hello.", date=day(2 + n))
            for n in range(6)]
    first = await listing(ctx, limit=2)
    assert [s["id"] for s in first["data"]] == [made[5], made[4]] and first["next_cursor"]
    # mail arrives while the client pages: a new thread, and a reply to one not read yet
    fresh = await add("new@x", subject="Brand new", body="Hi.", date=day(20))
    await add("t1-reply@x", subject="Re: Topic 1", body="More.", date=day(21), in_reply_to="t1@x")
    seen = [s["id"] for s in first["data"]]
    cursor = first["next_cursor"]
    while cursor:
        page = await listing(ctx, limit=2, cursor=cursor)
        seen += [s["id"] for s in page["data"]]
        cursor = page["next_cursor"]
    # nothing twice; every thread that did not change, once; the new mail is at the front
    assert len(seen) == len(set(seen)) and set(made) - {made[1]} <= set(seen)
    assert [s["id"] for s in (await listing(ctx, limit=2))["data"]] == [made[1], fresh]
    with pytest.raises(PylotaError) as other:
        await listing(ctx, limit=2, cursor=first["next_cursor"], is_unread=True)
    assert other.value.details == {"path": "cursor"}
    with pytest.raises(PylotaError) as edited:
        await listing(ctx, cursor="eyJrIjoidGhyIiwibyI6MX0")
    assert edited.value.details == {"path": "cursor"}


async def test_budgets_at_their_boundaries(box):
    ctx, add, conn = box["ctx"], box["add"], box["conn"]
    ten = ", ".join(f"p{n}@x.example" for n in range(9))  # the sender makes ten
    eleven = ", ".join(f"p{n}@x.example" for n in range(10))
    t10 = await add("ten@x", to=f"{OWN}, {ten}", subject="Ten", date=day(2))
    t11 = await add("eleven@x", to=f"{OWN}, {eleven}", subject="Eleven", date=day(3))
    by_id = {s["id"]: s for s in (await listing(ctx))["data"]}
    assert len(by_id[t10]["participants"]) == 10 and "participants_truncated" not in by_id[t10]
    assert len(by_id[t11]["participants"]) == 10 and by_id[t11]["participants_truncated"]
    assert OWN not in {p["address"] for p in by_id[t11]["participants"]}

    # labels: 64 in a thread's union whole, 65 cut
    await relabel(ctx, thread_id=t10, labels_add=[f"a{n:02d}" for n in range(64)])
    await add("eleven-2@x", subject="Re: Eleven", date=day(4), in_reply_to="eleven@x")
    await relabel(ctx, message_id=box["ids"]["eleven@x"], labels_add=[f"a{n:02d}" for n in range(33)])
    state = await relabel(ctx, message_id=box["ids"]["eleven-2@x"],
                          labels_add=[f"b{n:02d}" for n in range(32)])
    assert len(state["labels"]) == 32
    # subjects: 1,000 characters whole, 1,001 cut with … (older mail may hold more)
    await conn.execute("UPDATE threads SET subject = repeat('s', 1000) WHERE id = $1", t10)
    await conn.execute("UPDATE threads SET subject = repeat('s', 1001) WHERE id = $1", t11)
    page = await listing(ctx)
    by_id = {s["id"]: s for s in page["data"]}
    assert by_id[t10]["subject"] == "s" * 1000 and "subject_truncated" not in by_id[t10]
    assert by_id[t11]["subject"] == "s" * 999 + "…" and by_id[t11]["subject_truncated"]
    assert len(by_id[t10]["labels"]) == 64 and "labels_truncated" not in by_id[t10]
    assert len(by_id[t11]["labels"]) == 64 and by_id[t11]["labels_truncated"]
    assert page["truncated"] is True
    whole = await relabel(ctx, thread_id=t11, read=True)
    assert len(whole["labels"]) == 64 and whole["labels_truncated"] and whole["truncated"]


async def test_a_page_over_96_kb_drops_threads_from_the_end_and_the_cursor_goes_on(box):
    ctx, add, conn = box["ctx"], box["add"], box["conn"]
    made = [await add(f"big{n}@x", subject=f"Big {n}", date=day(2 + n // 24, hour=n % 24))
            for n in range(50)]
    # 50 subjects of 1,000 characters of 3 bytes each: 150 KB
    await conn.execute("UPDATE threads SET subject = repeat('€', 1000)")
    first = await listing(ctx, limit=50)
    size = len(msgspec.json.encode(first))
    assert size <= RESULT_BYTES and first["truncated"] is True and first["next_cursor"]
    assert 20 < len(first["data"]) < 50
    rest = await listing(ctx, limit=50, cursor=first["next_cursor"])
    seen = [s["id"] for s in first["data"] + rest["data"]]
    assert sorted(seen) == sorted(made) and rest["next_cursor"] is None


async def test_a_merged_threads_id_keeps_answering(box):
    ctx, add, conn = box["ctx"], box["add"], box["conn"]
    one = await add("p@x", subject="One", date=day(2))
    two = await add("q@x", subject="Two", date=day(3))
    three = await add("r@x", subject="Three", date=day(4))
    # three merges into two (the older), then two into one: three's alias moves along to one
    assert await add("m@x", subject="Re: both", date=day(5),
                     headers={"References": "<q@x> <r@x>"}) == two
    assert await add("n@x", subject="Re: all", date=day(6),
                     headers={"References": "<p@x> <m@x>"}) == one
    assert await conn.fetchval("SELECT count(*) FROM threads") == 1
    for gone in (two, three):
        thread = await threads.run(ctx, threads.GetThreadArgs(thread_id=gone))
        assert thread.id == one and thread.message_count == 5
        hits = (await found(ctx, f"thread:{gone}"))["hits"]
        assert len(hits) == 5 and {h["thread_id"] for h in hits} == {one}
        assert await first_matching(conn, box["desk"].id, MessageFilter(thread_id=gone)) \
            == box["ids"]["p@x"]
        state = await relabel(ctx, thread_id=gone, labels_add=["merged"])
        assert state["id"] == one and state["labels"] == ["merged"]
    assert await conn.fetchval("SELECT count(*) FROM thread_aliases WHERE thread_id = $1", one) == 2
    with pytest.raises(PylotaError) as missing:
        await threads.run(ctx, threads.GetThreadArgs(thread_id="thr_" + "0" * 26))
    assert missing.value.code is ErrorCode.THREAD_NOT_FOUND
    # another identity's key never reaches it through the alias either
    sales_key = await create_key(conn, tenant_id=box["desk"].tenant_id,
                                 identity_id=box["sales"].id, permissions=list(Permission))
    sales_ctx = ToolContext(db=ctx.db, redis=ctx.redis, settings=ctx.settings,
                            principal=await authenticate(conn, f"Bearer {sales_key[1]}"),
                            request_id="req_t")
    with pytest.raises(PylotaError) as foreign:
        await threads.run(sales_ctx, threads.GetThreadArgs(thread_id=two))
    assert foreign.value.code is ErrorCode.THREAD_NOT_FOUND


async def test_a_snippet_cut_inside_a_match_mark_closes_it(box):
    """snippet_chars cut «fscache» to «fscach…, leaving a mark open (found by a new user)."""
    await box["add"]("fs@x", sender="dev@kernel.example", subject="Patch",
                     body="The cifs readpages path now reads from fscache first, and falls back "
                          "to the server when fscache has nothing; tested on fscache volumes.")
    for chars in range(40, 201, 3):
        result = await search.run(box["ctx"], search.SearchArgs(
            q="fscache", mode="keyword", snippet_chars=chars))
        [hit] = result.hits
        assert len(hit.snippet) <= chars, chars
        assert hit.snippet.count("«") == hit.snippet.count("»"), (chars, hit.snippet)
