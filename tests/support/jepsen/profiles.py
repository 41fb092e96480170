"""Profiles: the cluster a run uses and how hard its nemesis may hit it.

A profile's limits are what the system under test is meant to survive: at most
``max_faults`` faults at once, at most ``max_bookies_down`` bookies and ``max_brokers_down``
brokers not serving at the same time (a full disk counts as a bookie down), and a bookie and a
broker down together only with ``bookie_with_broker``.

- ``single`` (the CI default): 3 bookies at 2/2/2, 2 brokers, one fault at a time, every kind;
- ``overlap``: the same cluster, a broker down together with a bookie (the case recovery with
  ensemble change fixes);
- ``five``: 5 bookies at 3/3/2, two bookies down at once, with a broker too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PROFILES", "Profile"]


@dataclass(frozen=True)
class Profile:
    name: str
    bookies: int = 3
    brokers: int = 2
    quorum: tuple[int, int, int] = (2, 2, 2)
    """Ensemble size, write quorum, ack quorum of every topic's ledgers."""
    kinds: dict[str, int] = field(
        default_factory=lambda: {
            "kill": 4,
            "pause": 2,
            "partition": 2,
            "metastore-restart": 1,
            "disk-full": 1,
            "slow-disk": 1,
        }
    )
    """Fault kind → weight."""
    max_faults: int = 1
    max_bookies_down: int = 1
    max_brokers_down: int = 1
    bookie_with_broker: bool = False
    disk_bookies: tuple[int, ...] = (2,)
    """Bookies whose ledger dir is a loop-mounted disk (the disk faults' targets)."""
    fault_s: tuple[float, float] = (2.0, 8.0)
    """How long a fault lasts (uniform)."""
    gap_s: tuple[float, float] = (1.0, 4.0)
    """Time between two fault decisions (uniform)."""


PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile("single"),
        Profile("overlap", max_faults=2, bookie_with_broker=True),
        Profile(
            "five",
            bookies=5,
            quorum=(3, 3, 2),
            max_faults=3,
            max_bookies_down=2,
            bookie_with_broker=True,
            disk_bookies=(3, 4),
        ),
    )
}
