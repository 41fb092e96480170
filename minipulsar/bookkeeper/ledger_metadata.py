"""Ledger metadata: the ensembles of a ledger and its state, stored at ``/ledgers/L{id}``
(:mod:`minipulsar.ledger_paths`: the bookies' garbage collector relies on that layout).

``ensembles`` is the ensemble history as ``(first_entry_id, [bookie ids])`` segments: entry
``e`` is stored on the ensemble of the last segment whose first entry is ``<= e``, on the
write set ``[(e + k) mod E for k in range(Qw)]``. Invariant ``E >= Qw >= Qa``.
``last_entry_id`` and ``length`` are final only when the state is CLOSED. Updates are
compare-and-set on the metadata key's version.

``digest_type`` and ``password`` are the ledger's, stored as BookKeeper stores them
(``digestType``, ``password`` in base64), so that any client — ledger recovery, AutoRecovery,
admin tools — can verify its entries and present its master key
(:mod:`minipulsar.bookkeeper.digest`). Metadata written without them reads as CRC32C and the
empty password, the defaults.
"""

from __future__ import annotations

import base64
import enum
import json
import time
from dataclasses import dataclass, field, replace

from minipulsar.bookkeeper.digest import DigestManager, DigestType
from minipulsar.ledger_paths import ledger_path

__all__ = ["LedgerMetadata", "LedgerState", "ledger_path"]


class LedgerState(str, enum.Enum):
    OPEN = "OPEN"
    IN_RECOVERY = "IN_RECOVERY"
    CLOSED = "CLOSED"


@dataclass(frozen=True, slots=True)
class LedgerMetadata:
    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    ensembles: tuple[tuple[int, tuple[str, ...]], ...]
    state: LedgerState = LedgerState.OPEN
    last_entry_id: int = -1
    length: int = 0
    ctime_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    custom: dict[str, str] = field(default_factory=dict)
    digest_type: DigestType = DigestType.CRC32C
    """How the writer digests each entry (every reader checks it)."""
    password: bytes = b""
    """The ledger's password; its master key is derived from it."""
    version: int = -1
    """Version of the metadata key this was read at (-1: not stored yet)."""

    def __post_init__(self) -> None:
        if not self.ensemble_size >= self.write_quorum >= self.ack_quorum >= 1:
            raise ValueError(
                f"E >= Qw >= Qa >= 1 must hold, got {self.ensemble_size}/{self.write_quorum}/{self.ack_quorum}"
            )
        for _, bookies in self.ensembles:
            assert len(bookies) == self.ensemble_size, "every ensemble has E bookies"

    @property
    def is_closed(self) -> bool:
        return self.state is LedgerState.CLOSED

    @property
    def last_ensemble(self) -> tuple[str, ...]:
        return self.ensembles[-1][1]

    def ensemble_for(self, entry_id: int) -> tuple[str, ...]:
        chosen = self.ensembles[0][1]
        for first_entry_id, bookies in self.ensembles:
            if first_entry_id > entry_id:
                break
            chosen = bookies
        return chosen

    def write_set(self, entry_id: int) -> list[str]:
        """The Qw bookies that store ``entry_id`` (round-robin striping over the ensemble)."""
        ensemble = self.ensemble_for(entry_id)
        size = self.ensemble_size
        return [ensemble[(entry_id + k) % size] for k in range(self.write_quorum)]

    def digest_manager(self) -> DigestManager:
        """A digest manager for this ledger's entries (it also holds the master key)."""
        return DigestManager(self.ledger_id, self.digest_type, self.password)

    def closed(self, last_entry_id: int, length: int) -> LedgerMetadata:
        return replace(self, state=LedgerState.CLOSED, last_entry_id=last_entry_id, length=length)

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "ensembleSize": self.ensemble_size,
                "writeQuorumSize": self.write_quorum,
                "ackQuorumSize": self.ack_quorum,
                "state": self.state.value,
                "lastEntryId": self.last_entry_id,
                "length": self.length,
                "ensembles": [[first, list(bookies)] for first, bookies in self.ensembles],
                "ctime": self.ctime_ms,
                "customMetadata": self.custom,
                "digestType": self.digest_type.value,
                "password": base64.b64encode(self.password).decode(),
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_bytes(cls, ledger_id: int, data: bytes, version: int) -> LedgerMetadata:
        raw = json.loads(data)
        return cls(
            ledger_id=ledger_id,
            ensemble_size=raw["ensembleSize"],
            write_quorum=raw["writeQuorumSize"],
            ack_quorum=raw["ackQuorumSize"],
            ensembles=tuple((int(first), tuple(bookies)) for first, bookies in raw["ensembles"]),
            state=LedgerState(raw["state"]),
            last_entry_id=raw["lastEntryId"],
            length=raw["length"],
            ctime_ms=raw.get("ctime", 0),
            custom=raw.get("customMetadata", {}),
            digest_type=DigestType(raw.get("digestType", DigestType.CRC32C.value)),
            password=base64.b64decode(raw.get("password", "")),
            version=version,
        )
