"""What a managed ledger keeps in the metadata store (Pulsar's ``ManagedLedgerInfo``):
the ordered list of its ledgers, at ``/managed-ledgers/{tenant}/{ns}/{domain}/{topic}``.

The last ledger is the one being written; its ``entries`` stays ``None`` until it is closed.

Invariant: ledgers are listed in id order; only the last one may have no entry count yet.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

ROOT = "/managed-ledgers"


def managed_ledger_path(name: str) -> str:
    return f"{ROOT}/{name}"


@dataclass(slots=True)
class LedgerInfo:
    ledger_id: int
    entries: int | None = None
    """None while the ledger is open for writing."""
    size: int = 0
    timestamp_ms: int = 0

    def to_json(self) -> dict:
        return {"ledgerId": self.ledger_id, "entries": self.entries, "size": self.size, "timestamp": self.timestamp_ms}

    @classmethod
    def from_json(cls, raw: dict) -> LedgerInfo:
        return cls(raw["ledgerId"], raw.get("entries"), raw.get("size", 0), raw.get("timestamp", 0))


@dataclass(slots=True)
class ManagedLedgerInfo:
    ledgers: list[LedgerInfo] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        return json.dumps(
            {"ledgers": [info.to_json() for info in self.ledgers], "properties": self.properties}, separators=(",", ":")
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> ManagedLedgerInfo:
        raw = json.loads(data)
        return cls([LedgerInfo.from_json(item) for item in raw.get("ledgers", [])], raw.get("properties", {}))
