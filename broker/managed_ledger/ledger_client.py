"""LedgerClient: what a managed ledger needs of the BookKeeper client (``minipulsar/bookkeeper``).

A managed ledger creates its ledgers, opens closed ones to read (recovering an open one
first) and deletes those trimmed away; nothing else. Invariant: a created ledger's id is
greater than ``id_above``, so a managed ledger's positions order by ledger id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from minipulsar.bookkeeper.ledger_handle import LedgerHandle


class LedgerClient(Protocol):
    async def create_ledger(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        custom: dict[str, str] | None = None,
        *,
        id_above: int = -1,
    ) -> LedgerHandle:
        """A new ledger, open for writing, with an id greater than ``id_above``."""
        ...

    async def open_ledger(self, ledger_id: int, *, recovery: bool = True) -> LedgerHandle:
        """A read handle; with ``recovery`` an open ledger is fenced, recovered and closed first."""
        ...

    async def delete_ledger(self, ledger_id: int) -> None: ...
