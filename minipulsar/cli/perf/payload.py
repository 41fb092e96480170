"""What perf sends: pulsar-perf's payload, ``size_bytes`` random capital letters from a fixed
seed — the same bytes on every run, so runs (and their compression ratios) compare."""

from __future__ import annotations

import random


def make_payload(size_bytes: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.randrange(26) + 65 for _ in range(size_bytes))
