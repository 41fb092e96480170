"""The checker: the invariants of a run, over its whole history.

With deduplication on and the whole log of every topic read once from the start, after the
cluster healed:

- **lost**: an acknowledged send that is not in the log;
- **duplicated**: a send stored more than once (at two positions);
- **out_of_order**: a producer's sends not in sequence order in its topic's log;
- **phantom**: a stored message that names no send of that topic (or one refused before
  it left the client: ``failed``);
- **corrupt**: a stored message whose bytes differ from what was sent;
- **moved**: an acknowledged send stored somewhere other than its receipt said;
- **two_writers**: a send that reached an earlier ledger of its topic although a later
  ledger had acknowledged a send before it was even sent. A topic's ledger ids grow with its
  ledgers' creation (:mod:`minipulsar.bookkeeper.ledger_id`), and its next ledger takes
  writes only after its owner stopped writing the previous one (a roll) or a new owner fenced
  it (a move), so this means two brokers were writing one topic at once (one clock orders
  every client: see :mod:`.history`).

``unknown`` outcomes may or may not be in the log; the report counts those that are.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from tests.support.jepsen.history import Consumed, History, Outcome, Send

__all__ = ["VIOLATION_KINDS", "CheckReport", "check"]

VIOLATION_KINDS = ("lost", "duplicated", "out_of_order", "phantom", "corrupt", "moved", "two_writers")
EXAMPLES_KEPT = 5


@dataclass
class CheckReport:
    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    """Outcomes (acked, failed, unknown, unknown_stored, consumed) and violations by kind."""
    examples: dict[str, list[str]] = field(default_factory=lambda: collections.defaultdict(list))
    """A few of each violation, described."""

    @property
    def violations(self) -> int:
        return sum(self.counts[kind] for kind in VIOLATION_KINDS)

    @property
    def ok(self) -> bool:
        return self.violations == 0

    def violation(self, kind: str, description: str) -> None:
        assert kind in VIOLATION_KINDS, kind
        self.counts[kind] += 1
        if len(self.examples[kind]) < EXAMPLES_KEPT:
            self.examples[kind].append(description)

    def describe(self) -> str:
        lines = [f"{kind}: {self.counts[kind]}" for kind in VIOLATION_KINDS if self.counts[kind]]
        lines += [f"  {kind}: {example}" for kind, examples in self.examples.items() for example in examples]
        return "\n".join(lines) or "no violation"


def check(history: History) -> CheckReport:
    report = CheckReport()
    sends = {(s.topic, s.producer, s.sequence): s for s in history.sends}
    for send in history.sends:
        report.counts[send.outcome.value] += 1
    stored = _stored_by_send(history.consumed, sends, report)
    for key, copies in stored.items():
        send = sends[key]
        if len({c.position for c in copies}) > 1:
            report.violation(
                "duplicated", f"{_send_name(send)} stored {len(copies)} times at {[c.position for c in copies]}"
            )
        if send.outcome is Outcome.UNKNOWN:
            report.counts["unknown_stored"] += 1
        _check_copy(send, copies[0], report)
    for send in history.sends:
        if send.outcome is Outcome.ACKED and (send.topic, send.producer, send.sequence) not in stored:
            report.violation(
                "lost", f"{_send_name(send)} acked at {send.position} (broker {send.broker}) never consumed"
            )
    _check_order(history.consumed, report)
    _check_writers(history.sends, report)
    return report


def _stored_by_send(
    consumed: list[Consumed], sends: dict[tuple[str, str, int], Send], report: CheckReport
) -> dict[tuple[str, str, int], list[Consumed]]:
    """Each stored copy by the send it names; phantoms reported."""
    stored: dict[tuple[str, str, int], list[Consumed]] = collections.defaultdict(list)
    for message in consumed:
        report.counts["consumed"] += 1
        key = (message.topic, *message.sender) if message.sender is not None else None
        send = sends.get(key) if key is not None else None
        if key is None or send is None or send.outcome is Outcome.FAILED:
            report.violation("phantom", f"{message.topic} {message.position} names {message.sender}: never sent")
            continue
        stored[key].append(message)
    return stored


def _check_copy(send: Send, copy: Consumed, report: CheckReport) -> None:
    if copy.payload_digest != send.digest:
        report.violation("corrupt", f"{_send_name(send)} at {copy.position}: bytes differ from those sent")
    if send.outcome is Outcome.ACKED and send.position is not None and send.position != copy.position:
        report.violation("moved", f"{_send_name(send)} acked at {send.position}, stored at {copy.position}")


def _check_order(consumed: list[Consumed], report: CheckReport) -> None:
    last: dict[tuple[str, str], int] = {}
    for message in sorted(consumed, key=lambda m: (m.topic, m.position)):
        if message.sender is None:
            continue
        producer, sequence = message.sender
        previous = last.get((message.topic, producer), -1)
        if sequence < previous:
            report.violation(
                "out_of_order", f"{message.topic} {producer}: #{sequence} at {message.position} after #{previous}"
            )
        last[(message.topic, producer)] = max(previous, sequence)


def _check_writers(sends: list[Send], report: CheckReport) -> None:
    by_ledger: dict[str, dict[int, list[Send]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for send in sends:
        if send.outcome is Outcome.ACKED and send.position is not None and send.done_s is not None:
            by_ledger[send.topic][send.position[0]].append(send)
    for topic, ledgers in by_ledger.items():
        later_first_ack: tuple[float, int] | None = None  # (earliest receipt, ledger) over later ledgers
        for ledger in sorted(ledgers, reverse=True):
            if later_first_ack is not None:
                latest = max(ledgers[ledger], key=lambda s: s.sent_s)
                if latest.sent_s > later_first_ack[0]:
                    report.violation(
                        "two_writers",
                        f"{topic}: {_send_name(latest)} sent at {latest.sent_s:.3f} stored in ledger {ledger} "
                        f"(broker {latest.broker}), but ledger {later_first_ack[1]} acked at {later_first_ack[0]:.3f}",
                    )
            first = min(s.done_s for s in ledgers[ledger] if s.done_s is not None)
            if later_first_ack is None or first < later_first_ack[0]:
                later_first_ack = (first, ledger)


def _send_name(send: Send) -> str:
    return f"{send.topic} {send.producer}#{send.sequence}"
