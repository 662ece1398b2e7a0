"""A synthetic business mailbox for the search benchmark, written as an mbox file.

    python -m bench.synthetic OUT.mbox [--messages 100000] [--seed 7]

Deterministic for a seed. Shapes taken from real mailboxes rather than uniform noise:

- threads: sizes drawn from a geometric distribution (mean 2.5; about 40% single messages, a few
  past 20), replies alternate between the mailbox (``ops@bench.example``) and the correspondent,
  carry ``In-Reply-To``/``References`` and quote the previous message (so later replies are longer);
- bodies: a log-normal number of words (median about 90, a long tail to a few thousand) drawn
  from a Zipf-distributed vocabulary of 20,000 words (business words first, then made-up ones);
- people: 3,000 correspondents at 400 domains, picked by Zipf frequency (a few write a lot);
- references: invoice, order and PCN numbers, UK plates, amounts and phone numbers in about a
  third of the threads, so ``ref:`` has something to find;
- attachments: about 8% of messages carry a small PDF or image;
- dates: spread over three years before 2026-11-01 (UTC), increasing within each thread.
"""

from __future__ import annotations

import argparse
import random
from datetime import datetime, timedelta, timezone
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

__all__ = ["write_mailbox", "OWN"]

OWN = "ops@bench.example"
_BUSINESS = (
    "invoice payment order delivery van parking fine appeal booking confirmed cancelled refund "
    "meeting schedule monday tuesday wednesday thursday friday contract renewal quote price "
    "discount account customer supplier shipment warehouse stock report quarterly budget "
    "insurance claim damage repair garage vehicle driver route depot fuel tyres service "
    "please thanks regards attached document signed agreement deadline overdue reminder urgent "
    "question answer update status issue problem fixed resolved ticket support request access "
    "password login portal website email phone call tomorrow today week month year team office "
    "lunch travel hotel flight train visit client project proposal review feedback approve"
).split()
_START = datetime(2023, 11, 1, tzinfo=timezone.utc)
_SPAN = timedelta(days=3 * 365)


class _World:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        syllables = ["ka", "lo", "mi", "ter", "ran", "vo", "sel", "dun", "pra", "nik", "ost", "bel"]
        made_up = {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
                   for _ in range(30_000)}
        pool = sorted(made_up - set(_BUSINESS))
        rng.shuffle(pool)
        self.words = _BUSINESS + pool[: 20_000 - len(_BUSINESS)]
        self.word_weights = [1 / (rank + 1) for rank in range(len(self.words))]
        domains = [f"{rng.choice(syllables)}{rng.choice(syllables)}{n}.example" for n in range(400)]
        domain_weights = [1 / (rank + 1) for rank in range(len(domains))]
        self.people = [(f"{rng.choice(self.words[:300]).title()} {rng.choice(self.words[:300]).title()}",
                        f"p{n}@{rng.choices(domains, domain_weights)[0]}")
                       for n in range(3_000)]
        self.people_weights = [1 / (rank + 1) ** 0.8 for rank in range(len(self.people))]

    def text(self, words: int) -> str:
        chosen = self.rng.choices(self.words, self.word_weights, k=words)
        lines, line = [], []
        for word in chosen:
            line.append(word)
            if len(line) > 12 or self.rng.random() < 0.02:
                lines.append(" ".join(line) + ".")
                line = []
        lines.append(" ".join(line))
        return "\n".join(lines)

    def reference(self) -> str:
        rng = self.rng
        letters = "ABCDEFGHJKLMNPRSTUVWXYZ"
        return rng.choice([
            f"Invoice INV-{rng.randint(2023, 2026)}-{rng.randint(1, 9999):04d}",
            f"Order #{rng.randint(10000, 99999)}",
            f"PCN {rng.choice(letters)}{rng.choice(letters)}{rng.randint(10**7, 10**8 - 1)}",
            f"vehicle {rng.choice(letters)}{rng.choice(letters)}{rng.randint(10, 99)} "
            f"{''.join(rng.choices(letters, k=3))}",
            f"£{rng.randint(10, 5000)}.{rng.randint(0, 99):02d}",
            f"call 020 {rng.randint(1000, 9999)} {rng.randint(1000, 9999)}",
        ])


def write_mailbox(path: Path, messages: int, seed: int = 7) -> int:
    """Write ``messages`` messages to the mbox file ``path``; returns the number of threads."""
    rng = random.Random(seed)
    world = _World(rng)
    written = threads = 0
    with path.open("wb") as out:
        while written < messages:
            threads += 1
            size = min(messages - written, 1 + int(rng.expovariate(1 / 1.5)))
            person = rng.choices(world.people, world.people_weights)[0]
            subject = " ".join(rng.choices(world.words[:400], k=rng.randint(2, 6))).capitalize()
            ref = world.reference() if rng.random() < 0.35 else ""
            when = _START + _SPAN * rng.random()
            previous: tuple[str, str] | None = None
            for n in range(size):
                inbound = n % 2 == 0
                msg = EmailMessage()
                mid = f"{threads}.{n}.{seed}@bench.example"
                msg["Message-ID"] = f"<{mid}>"
                msg["From"] = f"{person[0]} <{person[1]}>" if inbound else f"Ops <{OWN}>"
                msg["To"] = f"Ops <{OWN}>" if inbound else f"{person[0]} <{person[1]}>"
                msg["Subject"] = subject if n == 0 else f"Re: {subject}"
                msg["Date"] = format_datetime(when)
                if previous:
                    msg["In-Reply-To"] = f"<{previous[0]}>"
                    msg["References"] = f"<{previous[0]}>"
                words = max(5, min(4_000, int(rng.lognormvariate(4.5, 1.0))))
                body = world.text(words)
                if ref and (n == 0 or rng.random() < 0.3):
                    body = f"{body}\n\nRe {ref}."
                if previous:
                    quoted = "\n".join("> " + line for line in previous[1].splitlines()[:200])
                    body = f"{body}\n\nOn {format_datetime(when)}, they wrote:\n{quoted}"
                msg.set_content(body)
                if rng.random() < 0.08:
                    kind = rng.choice([("application", "pdf", "scan.pdf"), ("image", "jpeg", "photo.jpg")])
                    msg.add_attachment(rng.randbytes(rng.randint(2_000, 60_000)), maintype=kind[0],
                                       subtype=kind[1], filename=kind[2])
                data = bytes(msg).replace(b"\r\n", b"\n").replace(b"\nFrom ", b"\n>From ")
                out.write(b"From bench@bench.example Thu Jan  1 00:00:00 2026\n" + data + b"\n")
                previous = (mid, body)
                when += timedelta(minutes=rng.randint(5, 3 * 24 * 60))
                written += 1
    return threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    threads = write_mailbox(args.out, args.messages, args.seed)
    print(f"wrote {args.messages} messages in {threads} threads to {args.out}")


if __name__ == "__main__":
    main()
