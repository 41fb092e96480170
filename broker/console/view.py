"""The console's one JSON document (``GET /console/api/cluster``), built from what was gathered.

Pure: :func:`console_view` turns the brokers' answers (their Pulsar-shaped endpoints) and the
bookies' load reports into the page's document; :mod:`broker.console.gather` does the I/O.
Answers from other brokers are read defensively (a field missing or of the wrong type reads
as absent): another broker may run another version, and its figures must not break the page.

The document::

    {"cluster", "servedBy", "time" (epoch ms), "leader" (broker id | null), "errors": [...],
     "brokers": [{"brokerId", "webServiceUrl", "reachable", "errors", "leader", "self",
                  "load" (the load report's figures, or null), "bundles" (owned, sorted),
                  "topics", "counters": {msgInCount, msgOutCount, bytesInCount, bytesOutCount} (null
                  when its topics did not answer)}],
     "bookies": [{"bookieId", "state" ("writable" | "readonly" | "down"), "error", "info" (the
                  bookie's load report, or null), "quarantinedBy" [broker ids],
                  "pendingRequests" {broker id: n}}],
     "topics": [{"topic", "broker", "bundle", "msgRateIn", "msgRateOut", "msgThroughputIn",
                 "msgThroughputOut", "msgInCount", "msgOutCount", "bytesInCount", "bytesOutCount",
                 "storageSize", "backlogSize", "msgBacklog", "producerCount", "consumerCount",
                 "subscriptions": [{"name", "type", "msgBacklog", "msgRateOut", "consumers"}]}],
     "topicsTotal", "totals": {msgRateIn, msgRateOut, msgThroughputIn, msgThroughputOut}}

Invariants:

- every registered broker and every known bookie is listed, answering or not;
- ``topics`` holds at most ``topics_max`` topics, the busiest first (``topicsTotal`` counts all);
  ``totals`` and each broker's ``counters`` sum every topic, listed or not;
- nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LOAD_FIELDS = (
    "cpu",
    "memory",
    "directMemory",
    "bandwidthIn",
    "bandwidthOut",
    "msgRateIn",
    "msgRateOut",
    "msgThroughputIn",
    "msgThroughputOut",
    "numTopics",
    "numBundles",
    "numConsumers",
    "numProducers",
    "lastUpdate",
    "brokerVersionString",
)
"""What the console shows of a load report (``lastStats`` and the bundle lists stay out)."""
COUNTERS = ("msgInCount", "msgOutCount", "bytesInCount", "bytesOutCount")
RATES = ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")
TOPIC_SIZES = ("storageSize", "backlogSize")


@dataclass(frozen=True, slots=True)
class BrokerAnswers:
    """What one broker answered on its per-broker endpoints (None: it did not)."""

    broker_id: str
    web_service_url: str | None
    load_report: Any = None
    owned_namespaces: Any = None
    topics: Any = None
    bookies: Any = None
    errors: tuple[str, ...] = ()

    @property
    def reachable(self) -> bool:
        return any(x is not None for x in (self.load_report, self.owned_namespaces, self.topics, self.bookies))


@dataclass(frozen=True, slots=True)
class BookieAnswer:
    bookie_id: str
    state: str
    """``writable``, ``readonly`` (registered so) or ``down`` (a cookie, no registration)."""
    info: Mapping[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """The part read from the metadata store: who is there, who leads."""

    cluster: str
    served_by: str
    time_ms: int
    leader: str | None = None
    errors: tuple[str, ...] = ()
    brokers: Sequence[BrokerAnswers] = field(default_factory=list)
    bookies: Sequence[BookieAnswer] = field(default_factory=list)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def topic_rows(broker_id: str, stats: Any) -> Iterator[dict[str, Any]]:
    """One row per topic of a ``broker-stats/topics`` answer (``{ns: {bundle: {domain: {topic: …}}}}``)."""
    for namespace, bundles in _dict(stats).items():
        for bundle, domains in _dict(bundles).items():
            for topics in _dict(domains).values():
                for name, topic in _dict(topics).items():
                    yield _topic_row(broker_id, f"{namespace}/{bundle}", str(name), _dict(topic))


def _topic_row(broker_id: str, bundle: str, name: str, topic: dict[str, Any]) -> dict[str, Any]:
    subscriptions = [
        {
            "name": str(sub_name),
            "type": str(_dict(sub).get("type", "")),
            "msgBacklog": _number(_dict(sub).get("msgBacklog")),
            "msgRateOut": _number(_dict(sub).get("msgRateOut")),
            "consumers": len(c) if isinstance(c := _dict(sub).get("consumers"), list) else 0,
        }
        for sub_name, sub in sorted(_dict(topic.get("subscriptions")).items())
    ]
    return {
        "topic": name,
        "broker": broker_id,
        "bundle": bundle,
        **{key: _number(topic.get(key)) for key in (*RATES, *COUNTERS, *TOPIC_SIZES)},
        "msgBacklog": sum(s["msgBacklog"] for s in subscriptions),
        "producerCount": int(_number(topic.get("producerCount"))),
        "consumerCount": sum(s["consumers"] for s in subscriptions),
        "subscriptions": subscriptions,
    }


def _broker_row(answers: BrokerAnswers, topics: Sequence[dict[str, Any]], leader: str | None, me: str) -> dict:
    report = answers.load_report if isinstance(answers.load_report, dict) else None
    return {
        "brokerId": answers.broker_id,
        "webServiceUrl": answers.web_service_url,
        "reachable": answers.reachable,
        "errors": list(answers.errors),
        "leader": answers.broker_id == leader,
        "self": answers.broker_id == me,
        "load": None if report is None else {key: report.get(key) for key in LOAD_FIELDS},
        "bundles": sorted(_dict(answers.owned_namespaces)),
        "topics": len(topics),
        "counters": None if answers.topics is None else {key: sum(t[key] for t in topics) for key in COUNTERS},
    }


def _bookie_row(bookie: BookieAnswer, brokers: Sequence[BrokerAnswers]) -> dict[str, Any]:
    seen = {b.broker_id: _dict(_dict(b.bookies).get(bookie.bookie_id)) for b in brokers if b.bookies is not None}
    return {
        "bookieId": bookie.bookie_id,
        "state": bookie.state,
        "error": bookie.error,
        "info": None if bookie.info is None else dict(bookie.info),
        "quarantinedBy": sorted(broker for broker, view in seen.items() if view.get("quarantined") is True),
        "pendingRequests": {broker: int(_number(view.get("pendingRequests"))) for broker, view in seen.items()},
    }


def _busiest_first(row: dict[str, Any]) -> tuple[float, str]:
    return (-(row["msgRateIn"] + row["msgRateOut"]), row["topic"])


def console_view(facts: ClusterFacts, topics_max: int) -> dict[str, Any]:
    """The console's document (module docstring) from what was gathered."""
    per_broker = {b.broker_id: list(topic_rows(b.broker_id, b.topics)) for b in facts.brokers}
    topics = sorted((row for rows in per_broker.values() for row in rows), key=_busiest_first)
    return {
        "cluster": facts.cluster,
        "servedBy": facts.served_by,
        "time": facts.time_ms,
        "leader": facts.leader,
        "errors": list(facts.errors),
        "brokers": [_broker_row(b, per_broker[b.broker_id], facts.leader, facts.served_by) for b in facts.brokers],
        "bookies": [_bookie_row(b, facts.brokers) for b in facts.bookies],
        "topics": topics[:topics_max],
        "topicsTotal": len(topics),
        "totals": {key: sum(t[key] for t in topics) for key in RATES},
    }
