"""The group-commit rules (BookKeeper's Journal thread) as a pure policy."""

from __future__ import annotations

import pytest

from minipulsar.bookie.journal.group_commit import FlushReason, GroupCommitPolicy


def test_nothing_pending_never_flushes() -> None:
    assert GroupCommitPolicy(max_group_wait_s=0).should_flush(0, 0, 10.0, True) is None


@pytest.mark.parametrize(
    ("entries", "pending_bytes", "waited_s", "queue_empty", "expected"),
    [
        (1, 100, 0.0, False, None),  # young group, more may come
        (1, 100, 0.0, True, None),  # empty queue alone is not enough
        (1, 100, 0.002, False, FlushReason.MAX_WAIT),  # oldest waited past 1 ms
        (3, 600 * 1024, 0.0, False, FlushReason.MAX_OUTSTANDING_BYTES),
        (10, 100, 0.0, False, FlushReason.MAX_ENTRIES),
        (10, 600 * 1024, 0.5, True, FlushReason.MAX_OUTSTANDING_BYTES),  # bytes are checked first
    ],
)
def test_flush_reasons(entries, pending_bytes, waited_s, queue_empty, expected) -> None:
    policy = GroupCommitPolicy(
        max_group_wait_s=0.001, buffered_writes_threshold_bytes=512 * 1024, buffered_entries_threshold=10
    )
    assert policy.should_flush(entries, pending_bytes, waited_s, queue_empty) is expected


def test_flush_when_queue_empty() -> None:
    policy = GroupCommitPolicy(max_group_wait_s=1.0, flush_when_queue_empty=True)
    assert policy.should_flush(1, 10, 0.0, queue_empty=True) is FlushReason.EMPTY_QUEUE
    assert policy.should_flush(1, 10, 0.0, queue_empty=False) is None


def test_zero_wait_flushes_at_once_and_entries_threshold_zero_is_off() -> None:
    policy = GroupCommitPolicy(max_group_wait_s=0, buffered_entries_threshold=0)
    assert policy.should_flush(100_000, 10, 0.0, False) is FlushReason.MAX_WAIT


def test_wait_is_what_remains_of_the_group_wait() -> None:
    policy = GroupCommitPolicy(max_group_wait_s=0.010)
    assert policy.wait_s(0.004) == pytest.approx(0.006)
    assert policy.wait_s(0.5) == 0.0


def test_negative_wait_is_refused() -> None:
    with pytest.raises(ValueError):
        GroupCommitPolicy(max_group_wait_s=-1)


def test_group_full_only_caps_groups_without_adaptive_group_writes() -> None:
    adaptive = GroupCommitPolicy(buffered_writes_threshold_bytes=1000, buffered_entries_threshold=4)
    fixed = GroupCommitPolicy(
        buffered_writes_threshold_bytes=1000, buffered_entries_threshold=4, adaptive_group_writes=False
    )
    assert not adaptive.group_full(100, 10**6)
    assert fixed.group_full(4, 10) and fixed.group_full(1, 1000)
    assert not fixed.group_full(3, 999)
