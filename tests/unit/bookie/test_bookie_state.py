"""Goal: the bookie is read-only exactly while some cause holds, and its listener hears each
flip once, with the reason (bookie/state.py)."""

from __future__ import annotations

from minipulsar.bookie.http_api import READ_ONLY_BY_HAND
from minipulsar.bookie.state_manager import LEDGER_DIRS_FULL, BookieStateManager


def test_read_only_while_any_cause_holds_and_each_flip_is_told_once() -> None:
    flips: list[tuple[bool, str]] = []
    state = BookieStateManager(lambda read_only, reason: flips.append((read_only, reason)))
    journal = READ_ONLY_BY_HAND
    assert not state.read_only and state.reason == ""

    state.set_cause(LEDGER_DIRS_FULL, True)
    state.set_cause(LEDGER_DIRS_FULL, True)  # already holds: no second flip
    state.set_cause(journal, True)
    assert state.read_only and state.reason == f"{LEDGER_DIRS_FULL}; {journal}"
    state.set_cause(LEDGER_DIRS_FULL, False)  # the operator's still holds: still read-only
    assert state.read_only and state.reason == journal
    state.set_cause(journal, False)
    assert not state.read_only
    assert flips == [(True, LEDGER_DIRS_FULL), (False, journal)]


def test_clearing_a_cause_that_never_held_changes_nothing() -> None:
    flips: list[tuple[bool, str]] = []
    state = BookieStateManager(lambda read_only, reason: flips.append((read_only, reason)))
    state.set_cause(LEDGER_DIRS_FULL, False)
    assert not state.read_only and flips == []
