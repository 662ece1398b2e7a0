"""DKIM verified at ingest (``shared.mail.signatures``): test mail signed with a key made for the
run, its public half served by the test's own resolver; the DNS resolver against a DNS server
on loopback. No network."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import dns.message
import dns.rcode
import dns.rrset

from shared.mail.signatures import DkimCheck, DnsResolver, MAX_SIGNATURES, verify_dkim

RAW = (b"From: Ann <ann@acme.example>\r\nTo: desk@pylota.example\r\nSubject: Hello\r\n"
       b"Date: Mon, 02 Nov 2026 10:00:00 +0000\r\nMessage-ID: <s1@acme.example>\r\n\r\n"
       b"Your code is 123456.\r\n")


async def test_a_good_signature_passes(dkim_key, resolver) -> None:
    dkim_key.publish(resolver, "acme.example")
    signed = dkim_key.sign(RAW, "acme.example")
    assert await verify_dkim(signed, resolver) == [
        DkimCheck(domain="acme.example", selector="sel1", result="pass")]
    # Line endings do not matter (mbox files store LF).
    assert (await verify_dkim(signed.replace(b"\r\n", b"\n"), resolver))[0].result == "pass"
    assert resolver.asked[0] == "sel1._domainkey.acme.example."


async def test_a_changed_body_or_header_fails(dkim_key, resolver) -> None:
    dkim_key.publish(resolver, "acme.example")
    signed = dkim_key.sign(RAW, "acme.example")
    body = signed.replace(b"123456", b"654321")
    header = signed.replace(b"Subject: Hello", b"Subject: Pay now")
    assert (await verify_dkim(body, resolver))[0].result == "fail"
    assert (await verify_dkim(header, resolver))[0].result == "fail"


async def test_another_key_fails_and_no_key_or_no_answer_is_not_a_failure(dkim_key,
                                                                          resolver) -> None:
    from tests.shared.mail.conftest import DkimKey

    signed = dkim_key.sign(RAW, "acme.example")
    assert (await verify_dkim(signed, resolver))[0].result == "permerror"  # no key published
    resolver.records["sel1._domainkey.acme.example."] = DkimKey(1024).txt
    assert (await verify_dkim(signed, resolver))[0].result == "fail"
    resolver.records["sel1._domainkey.acme.example."] = b"v=DKIM1; k=rsa; p=bm90IGEga2V5"
    assert (await verify_dkim(signed, resolver))[0].result == "permerror"
    resolver.failing.add("sel1._domainkey.acme.example.")
    assert (await verify_dkim(signed, resolver))[0].result == "temperror"


async def test_unsigned_malformed_and_too_many_signatures(dkim_key, resolver) -> None:
    assert await verify_dkim(RAW, resolver) == []
    broken = b"DKIM-Signature: v=1; a=rsa-sha256; d=acme.example\r\n" + RAW
    assert await verify_dkim(broken, resolver) == [
        DkimCheck(domain="acme.example", selector="", result="permerror")]
    assert resolver.asked == []
    many = RAW
    for n in range(MAX_SIGNATURES + 2):
        dkim_key.publish(resolver, f"s{n}.example")
        many = dkim_key.sign(many, f"s{n}.example")
    checks = await verify_dkim(many, resolver)
    assert len(checks) == MAX_SIGNATURES
    assert await verify_dkim(b"\x00\xff not mail", resolver) == []
    # A first line of spaces makes dkimpy's header parser raise IndexError (10 of the kit's
    # single messages start so; one stopped a whole import: found by an attack).
    assert await verify_dkim(b" \n" + broken, resolver) == []


@contextlib.asynccontextmanager
async def dns_server(records: dict[str, bytes]) -> AsyncIterator[int]:
    """A DNS server on 127.0.0.1 that answers TXT queries from ``records``; yields its port."""

    class Answer(asyncio.DatagramProtocol):
        def connection_made(self, transport) -> None:
            self.transport = transport

        def datagram_received(self, data: bytes, addr) -> None:
            query = dns.message.from_wire(data)
            reply = dns.message.make_response(query)
            name = query.question[0].name.to_text()
            if name in records:
                # A long key is several character-strings of at most 255 (RFC 1035 3.3.14).
                data = records[name].decode()
                strings = " ".join(f'"{data[i:i + 255]}"' for i in range(0, len(data), 255))
                reply.answer.append(dns.rrset.from_text(name, 60, "IN", "TXT", strings))
            else:
                reply.set_rcode(dns.rcode.NXDOMAIN)
            self.transport.sendto(reply.to_wire(), addr)

    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(Answer, local_addr=("127.0.0.1", 0))
    try:
        yield transport.get_extra_info("sockname")[1]
    finally:
        transport.close()


async def test_the_dns_resolver_reads_txt_records_and_their_absence(dkim_key) -> None:
    async with asyncio.timeout(10):
        async with dns_server({"sel1._domainkey.acme.example.": dkim_key.txt}) as port:
            dns_resolver = DnsResolver(nameservers=["127.0.0.1"], port=port, timeout=2)
            assert await dns_resolver.txt("sel1._domainkey.acme.example.") == dkim_key.txt
            assert await dns_resolver.txt("nothing.acme.example.") is None
            signed = dkim_key.sign(RAW, "acme.example")
            assert (await verify_dkim(signed, dns_resolver))[0].result == "pass"
