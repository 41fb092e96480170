"""Entry payloads for bookie tests, each a function of (ledger id, entry id): a read checks
itself against the same call, with nothing kept from the write.

- :func:`entry_payload` is readable (``b"ledger:entry:tag:...."``), for failures worth reading;
- :func:`payload_for` is random bytes of one size; :func:`payload_of_varied_size` random bytes of
  a size drawn from ``sizes`` (entry logs, caches and frames see a mix).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

_ENTRY_SEED_STRIDE = 1_000_003
"""A prime above any entry id a test writes: (ledger, entry) pairs get distinct seeds."""


def entry_payload(ledger_id: int, entry_id: int, tag: str = "", size: int = 100) -> bytes:
    """``ledger:entry:tag:`` padded with dots to ``size`` bytes (longer when the prefix is)."""
    return f"{ledger_id}:{entry_id}:{tag}:".encode().ljust(size, b".")


def payload_for(ledger_id: int, entry_id: int, size: int = 1000) -> bytes:
    """``size`` random bytes seeded by (ledger, entry)."""
    return random.Random(ledger_id * _ENTRY_SEED_STRIDE + entry_id).randbytes(size)


def payload_of_varied_size(ledger_id: int, entry_id: int, sizes: Sequence[int], seed: int = 0) -> bytes:
    """Random bytes of one of ``sizes``, both drawn from (ledger, entry) and ``seed``."""
    rng = random.Random(seed ^ (ledger_id * _ENTRY_SEED_STRIDE + entry_id))
    return rng.randbytes(rng.choice(sizes))
