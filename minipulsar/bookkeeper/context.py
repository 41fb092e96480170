"""What a ledger handle needs from the BookKeeper client that created it.

Invariant: one context per BookKeeper client, shared by all of its ledger handles.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from minipulsar.bookkeeper.add_budget import AddBudget
from minipulsar.bookkeeper.bookie_client import BookieClient
from minipulsar.metadata.store import MetadataStore

ReplaceBookie = Callable[[Sequence[str], int, int, int, frozenset[str]], Awaitable[str]]
"""``(ensemble, index, write_quorum, ack_quorum, exclude) -> bookie``: a replacement for
``ensemble[index]``; raises NotEnoughBookiesError."""


@dataclass(frozen=True, slots=True)
class ClientContext:
    bookies: BookieClient
    store: MetadataStore
    replace_bookie: ReplaceBookie
    record_error: Callable[[str, BaseException], None]
    """Tell the quarantine a bookie failed a request."""
    client_add_budget: AddBudget
    max_pending_add_bytes_per_ledger: int = 16 * 1024 * 1024
    speculative_read_timeout_s: float = 0.0
    """0: no speculative reads."""
