"""Where a scenario's bookies keep their journals and ledgers, and how to read a topic's stats.

:func:`bookies_on_disks` lays bookies out on a :class:`~minipulsar.lab.disk_api.DiskSet`: by
default each bookie has a journal disk and a ledger disk of its own (BookKeeper's advice);
``journal_disk_of`` maps several bookies onto one journal disk (BIGO's topology: three bookies
per journal HDD, one ledger HDD each).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from minipulsar.lab.cluster import BookieSpec, Server
from minipulsar.lab.disk_api import DiskSet
from minipulsar.lab.probes import Http

TENANT_NAMESPACE = "public/default"


def bookies_on_disks(
    disks: DiskSet,
    count: int,
    *,
    journal_disk_of: Callable[[int], str] = lambda i: f"journal-{i}",
    ledger_disk_of: Callable[[int], str] = lambda i: f"ledger-{i}",
    settings: Mapping[str, object] | None = None,
) -> list[BookieSpec]:
    specs = []
    for index in range(count):
        owner = f"bookie-{index}"
        journal = disks.disk(journal_disk_of(index), "journal")
        ledger = disks.disk(ledger_disk_of(index), "ledger")
        specs.append(
            BookieSpec(
                journal_dir=journal.directory(f"{owner}/journal"),
                ledger_dir=ledger.directory(f"{owner}/ledgers"),
                settings={**disks.bookie_settings(journal, ledger), **(settings or {})},
            )
        )
    return specs


def topic_url(topic: str) -> str:
    """``persistent://public/default/x`` or ``x`` → ``persistent/public/default/x`` (the admin path)."""
    if "://" in topic:
        domain, rest = topic.split("://", 1)
        return f"{domain}/{rest}"
    return f"persistent/{TENANT_NAMESPACE}/{topic}"


async def topic_stats(http: Http, broker: Server, topic: str) -> dict[str, Any] | None:
    """``GET /admin/v2/<topic>/stats`` from ``broker`` (None when it does not answer 200)."""
    stats = await http.json(f"{broker.http_url}/admin/v2/{topic_url(topic)}/stats")
    return stats if isinstance(stats, dict) else None
