"""What the harness's clients record: every send and its outcome, every consumed message.

- A send is identified by (producer name, sequence number); its payload starts with
  ``producer|sequence|`` so a consumed message names the send it came from, and the send
  records the payload's digest so a consumed message can be compared byte for byte.
- Outcomes: ``acked`` (a receipt: a message id, or none for a duplicate the broker dropped),
  ``failed`` (refused before it was handed to a connection: it was never stored), ``unknown``
  (timed out, or the connection dropped: it may or may not be stored).
- Times are one process's ``time.monotonic()``: every client of a run lives in the harness
  process, so sends and receipts of different producers are ordered by one clock.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Consumed", "History", "Outcome", "Send", "digest_of", "sender_of", "tagged_payload"]


class Outcome(str, enum.Enum):
    PENDING = "pending"
    ACKED = "acked"
    FAILED = "failed"
    UNKNOWN = "unknown"


Position = tuple[int, int]
"""(ledger id, entry id) of a stored message."""


def digest_of(payload: bytes) -> str:
    return hashlib.blake2b(payload, digest_size=16).hexdigest()


def tagged_payload(producer: str, sequence: int, filler: bytes) -> bytes:
    return f"{producer}|{sequence}|".encode() + filler


def sender_of(payload: bytes) -> tuple[str, int] | None:
    """(producer, sequence) a payload names, or None when it names none."""
    parts = payload.split(b"|", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0].decode(errors="replace"), int(parts[1])


@dataclass(slots=True)
class Send:
    topic: str
    producer: str
    sequence: int
    digest: str
    sent_s: float
    outcome: Outcome = Outcome.PENDING
    done_s: float | None = None
    position: Position | None = None
    """Where the receipt says it is stored; None for a duplicate receipt (-1:-1) or no receipt."""
    broker: str = ""
    """The broker address whose connection carried the receipt (as far as the client can tell)."""
    error: str = ""


@dataclass(slots=True)
class Consumed:
    topic: str
    payload_digest: str
    position: Position
    sender: tuple[str, int] | None
    """(producer, sequence) the payload names; None: it names no send."""


@dataclass
class History:
    sends: list[Send] = field(default_factory=list)
    consumed: list[Consumed] = field(default_factory=list)
    """In delivery order, per topic interleaved: the checker orders by topic."""
    faults: list[tuple[float, str, str]] = field(default_factory=list)
    """(time, fault kind, ``start target`` / ``stop target``): the nemesis's log."""

    def send(self, topic: str, producer: str, sequence: int, payload: bytes, now_s: float) -> Send:
        record = Send(topic, producer, sequence, digest_of(payload), now_s)
        self.sends.append(record)
        return record

    def consume(self, topic: str, payload: bytes, position: Position) -> Consumed:
        record = Consumed(topic, digest_of(payload), position, sender_of(payload))
        self.consumed.append(record)
        return record

    def dump(self, path: Path) -> None:
        """The whole history as JSON (sends, consumed messages, the fault log), for a report."""
        document = {
            "sends": [dataclasses.asdict(s) for s in self.sends],
            "consumed": [dataclasses.asdict(c) for c in self.consumed],
            "faults": self.faults,
        }
        path.write_text(json.dumps(document, default=str))
