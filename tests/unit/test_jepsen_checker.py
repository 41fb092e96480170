"""The fault harness's checker on hand-made histories: a clean history passes, and each kind
of violation is found (and only that kind)."""

from __future__ import annotations

from tests.support.jepsen.checker import VIOLATION_KINDS, check
from tests.support.jepsen.history import History, Outcome, Send, tagged_payload

TOPIC = "t"


def acked(history: History, producer: str, sequence: int, position: tuple[int, int], sent_s: float) -> Send:
    send = history.send(TOPIC, producer, sequence, tagged_payload(producer, sequence, b"x"), sent_s)
    send.outcome, send.done_s, send.position = Outcome.ACKED, sent_s + 0.01, position
    return send


def clean_history() -> History:
    """p sends 0..3 into ledger 1 then ledger 2; q sends 0..1 into ledger 2; all read back."""
    history = History()
    for sequence in range(4):
        ledger, entry = (1, sequence) if sequence < 2 else (2, sequence - 2)
        acked(history, "p", sequence, (ledger, entry), 1.0 + sequence)
    for sequence in range(2):
        acked(history, "q", sequence, (2, 2 + sequence), 10.0 + sequence)
    for send in history.sends:
        assert send.position is not None
        history.consume(TOPIC, tagged_payload(send.producer, send.sequence, b"x"), send.position)
    return history


def only(report_counts: object, kind: str) -> None:
    counts = {k: report_counts[k] for k in VIOLATION_KINDS if report_counts[k]}  # type: ignore[index]
    assert list(counts) == [kind], counts


def test_a_clean_history_passes() -> None:
    report = check(clean_history())
    assert report.ok, report.describe()
    assert report.counts["acked"] == 6 and report.counts["consumed"] == 6


def test_an_unknown_outcome_may_or_may_not_be_stored() -> None:
    history = clean_history()
    history.sends[-1].outcome = Outcome.UNKNOWN
    history.send(TOPIC, "q", 2, tagged_payload("q", 2, b"x"), 20.0).outcome = Outcome.UNKNOWN
    report = check(history)
    assert report.ok, report.describe()
    assert report.counts["unknown_stored"] == 1


def test_an_acked_send_missing_from_the_log_is_lost() -> None:
    history = clean_history()
    del history.consumed[1]
    only(check(history).counts, "lost")


def test_a_send_stored_twice_is_duplicated() -> None:
    history = clean_history()
    history.consume(TOPIC, tagged_payload("q", 1, b"x"), (3, 0))
    only(check(history).counts, "duplicated")


def test_a_producer_out_of_sequence_order_is_out_of_order() -> None:
    history = clean_history()
    first, second = history.consumed[0], history.consumed[1]
    first.position, second.position = second.position, first.position
    for send in history.sends[:2]:  # the receipts say the same, so only the order is wrong
        send.position = (1, 1 - send.sequence)
    only(check(history).counts, "out_of_order")


def test_a_message_nobody_sent_is_a_phantom() -> None:
    history = clean_history()
    history.consume(TOPIC, tagged_payload("r", 0, b"x"), (3, 0))
    history.consume(TOPIC, b"garbage", (3, 1))
    report = check(history)
    only(report.counts, "phantom")
    assert report.counts["phantom"] == 2


def test_a_stored_send_that_failed_before_leaving_is_a_phantom() -> None:
    history = clean_history()
    history.send(TOPIC, "q", 2, tagged_payload("q", 2, b"x"), 20.0).outcome = Outcome.FAILED
    history.consume(TOPIC, tagged_payload("q", 2, b"x"), (3, 0))
    only(check(history).counts, "phantom")


def test_different_bytes_are_corrupt() -> None:
    history = clean_history()
    history.consumed[2] = history.consume(TOPIC, tagged_payload("p", 2, b"y"), (2, 0))
    history.consumed.pop()
    only(check(history).counts, "corrupt")


def test_a_send_stored_elsewhere_than_its_receipt_says_has_moved() -> None:
    history = clean_history()
    history.sends[0].position = (1, 7)
    only(check(history).counts, "moved")


def test_a_later_send_into_an_earlier_ledger_means_two_writers() -> None:
    """r#0 is sent at 12.5, after ledger 2 acknowledged p#2 (at 3.01), yet stored in ledger 1:
    ledger 1 was still taking writes while ledger 2 did."""
    history = clean_history()
    stale = acked(history, "r", 0, (1, 2), 12.5)
    assert stale.position is not None
    history.consume(TOPIC, tagged_payload("r", 0, b"x"), stale.position)
    report = check(history)
    only(report.counts, "two_writers")
    assert "ledger 1" in report.examples["two_writers"][0]


def test_a_late_receipt_from_an_earlier_ledger_is_not_two_writers() -> None:
    """A receipt of ledger 1 that arrives after ledger 2's first (a paused broker's last
    receipts) is fine: that send left before ledger 2 took any."""
    history = clean_history()
    history.sends[1].done_s = 50.0
    assert check(history).ok
