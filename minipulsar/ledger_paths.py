"""Where ledger metadata lives in the metadata store: ``/ledgers/L{id}`` (BookKeeper's flat
ledger manager layout).

The contract between the BookKeeper client in the broker, which creates a ledger's key before
writing any entry and deletes it when the ledger is deleted, and the bookie's garbage
collector, which removes a ledger's local data once its key is gone. Other children of
``/ledgers`` (``available``, ``idgen``, ``cookies``) are not ledgers: :func:`parse_ledger_node`
tells them apart. ``/ledgers/cookies/{bookie id}`` holds each bookie's cookie
(:mod:`bookie.cookie`), as in BookKeeper.
"""

from __future__ import annotations

LEDGERS_ROOT = "/ledgers"
LEDGER_NODE_PREFIX = "L"
COOKIES_ROOT = f"{LEDGERS_ROOT}/cookies"


def cookie_path(bookie_id: str) -> str:
    return f"{COOKIES_ROOT}/{bookie_id}"


def ledger_path(ledger_id: int) -> str:
    return f"{LEDGERS_ROOT}/{LEDGER_NODE_PREFIX}{ledger_id}"


def parse_ledger_node(name: str) -> int | None:
    """The ledger id of a child name of ``/ledgers`` (``L42`` → 42), None for anything else."""
    digits = name[len(LEDGER_NODE_PREFIX) :]
    if not name.startswith(LEDGER_NODE_PREFIX) or not digits.isdigit() or not digits.isascii():
        return None
    return int(digits)
