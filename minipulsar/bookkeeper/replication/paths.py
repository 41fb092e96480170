"""Where AutoRecovery keeps its state in the metadata store: BookKeeper's
``ZkLedgerUnderreplicationManager`` and ``ZkLedgerAuditorManager`` layout under
``/ledgers/underreplication``.

- ``ledgers/{4 hex}/{4 hex}/{4 hex}/{4 hex}/urL{id:010d}``: one mark per under-replicated
  ledger, on the hierarchical path of its id (16 bits per level, most significant first), so
  no node has more than 65 536 children; the value names the bookies to replace;
- ``locks/urL{id:010d}``: the ephemeral lock a ReplicationWorker holds while it works a ledger;
- ``disable``: present while AutoRecovery is disabled (workers take no ledger, the auditor
  marks none);
- ``lostBookieRecoveryDelay``: seconds (decimal text) the auditor waits after a bookie goes
  before it marks that bookie's ledgers (absent: the auditor's configured value);
- ``auditorelection/V_{seq:010d}``: the ephemeral votes of the auditor election; the lowest
  sequence number is the auditor. The node's own value holds the next sequence number.

Pure: no I/O.
"""

from __future__ import annotations

from minipulsar.ledger_paths import LEDGERS_ROOT

UNDERREPLICATION_ROOT = f"{LEDGERS_ROOT}/underreplication"
UR_LEDGERS_ROOT = f"{UNDERREPLICATION_ROOT}/ledgers"
UR_LOCKS_ROOT = f"{UNDERREPLICATION_ROOT}/locks"
DISABLE_PATH = f"{UNDERREPLICATION_ROOT}/disable"
LOST_BOOKIE_RECOVERY_DELAY_PATH = f"{UNDERREPLICATION_ROOT}/lostBookieRecoveryDelay"
ELECTION_PATH = f"{UNDERREPLICATION_ROOT}/auditorelection"
VOTE_PREFIX = "V_"
UR_NODE_PREFIX = "urL"
LEDGER_ID_MAX = (1 << 63) - 1


def ur_node_name(ledger_id: int) -> str:
    """``urL0000000042``: the name of a ledger's mark and of its lock."""
    if not 0 <= ledger_id <= LEDGER_ID_MAX:
        raise ValueError(f"ledger id out of range: {ledger_id}")
    return f"{UR_NODE_PREFIX}{ledger_id:010d}"


def ur_parent_path(ledger_id: int) -> str:
    """The hierarchical directory of a ledger's mark (BookKeeper's ``getParentZnodePath``)."""
    levels = [f"{(ledger_id >> shift) & 0xFFFF:04x}" for shift in (48, 32, 16, 0)]
    return "/".join((UR_LEDGERS_ROOT, *levels))


def ur_ledger_path(ledger_id: int) -> str:
    return f"{ur_parent_path(ledger_id)}/{ur_node_name(ledger_id)}"


def ur_lock_path(ledger_id: int) -> str:
    return f"{UR_LOCKS_ROOT}/{ur_node_name(ledger_id)}"


def parse_ur_node(name: str) -> int | None:
    """The ledger id of a mark's (or lock's) name, None for anything else."""
    digits = name[len(UR_NODE_PREFIX) :]
    if not name.startswith(UR_NODE_PREFIX) or not digits.isascii() or not digits.isdigit():
        return None
    return int(digits)


def vote_name(sequence: int) -> str:
    return f"{VOTE_PREFIX}{sequence:010d}"


def parse_vote(name: str) -> int | None:
    """The sequence number of a vote's name, None for anything else."""
    digits = name[len(VOTE_PREFIX) :]
    if not name.startswith(VOTE_PREFIX) or not digits.isascii() or not digits.isdigit():
        return None
    return int(digits)
