"""Topic stats with Pulsar's field names: ``pulsar-admin topics stats`` and ``stats-internal``.

Counters are read as they are now; rates (``msgRateIn`` …) are those of the last
``statsUpdateFrequencyInSecs`` interval (:func:`sample_rates`, called by the broker's timer).
The same functions serve persistent topics (a managed ledger, cursors) and non-persistent ones
(no storage; their subscriptions count dropped messages instead of a backlog).

Fields of the subscription, consumer and managed-ledger objects that another module may not
have yet are read with ``getattr`` and a neutral default.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from minipulsar.broker.managed_ledger.position import Position

# -- rates ----------------------------------------------------------------------------------------


def sample_rates(topic: Any, elapsed_s: float) -> None:
    """Turn the counters' growth since the previous sample into per-second rates."""
    rates, counters = topic.rates, topic.counters
    rates.begin()
    rates.sample(topic, "msgIn", counters.messages_in, elapsed_s)
    rates.sample(topic, "bytesIn", counters.bytes_in, elapsed_s)
    rates.sample(topic, "msgOut", counters.messages_out, elapsed_s)
    rates.sample(topic, "bytesOut", counters.bytes_out, elapsed_s)
    for producer in counters.producers.values():
        rates.sample(producer, "msgIn", producer.messages_in, elapsed_s)
        rates.sample(producer, "bytesIn", producer.bytes_in, elapsed_s)
    for subscription in topic.subscriptions.values():
        rates.sample(subscription, "redeliver", getattr(subscription, "msg_redeliver_counter", 0), elapsed_s)
        rates.sample(subscription, "drop", getattr(subscription, "msg_drop_counter", 0), elapsed_s)
        for consumer in subscription.consumers:
            rates.sample(consumer, "msgOut", consumer.messages_out, elapsed_s)
            rates.sample(consumer, "bytesOut", consumer.bytes_out, elapsed_s)
    rates.end()


# -- stats ----------------------------------------------------------------------------------------


def topic_stats(topic: Any) -> dict:
    """``GET …/stats``: rates, counters, storage, publishers, subscriptions with their consumers."""
    rates, counters = topic.rates, topic.counters
    rate_in, throughput_in = rates.get(topic, "msgIn"), rates.get(topic, "bytesIn")
    ledger = getattr(topic, "ledger", None)
    subscriptions = {name: _subscription_stats(topic, sub) for name, sub in topic.subscriptions.items()}
    stats = {
        "msgRateIn": rate_in,
        "msgThroughputIn": throughput_in,
        "msgRateOut": rates.get(topic, "msgOut"),
        "msgThroughputOut": rates.get(topic, "bytesOut"),
        "msgInCounter": counters.messages_in,
        "bytesInCounter": counters.bytes_in,
        "msgOutCounter": counters.messages_out,
        "bytesOutCounter": counters.bytes_out,
        "averageMsgSize": throughput_in / rate_in if rate_in else 0.0,
        "storageSize": storage_size(topic),
        "backlogSize": backlog_size(topic),
        "publishers": [_publisher_stats(topic, p) for p in counters.producers.values()],
        "subscriptions": subscriptions,
        "deduplicationStatus": "Enabled" if getattr(topic, "deduplication", None) is not None else "Disabled",
    }
    if ledger is not None:
        stats["entryCacheHits"] = getattr(ledger, "cache_hits", 0)
        stats["entryCacheMisses"] = getattr(ledger, "cache_misses", 0)
        # Not in Pulsar's topic stats (they are internal stats); kept for existing users.
        stats["ledgers"] = [info.to_json() for info in ledger.ledgers]
        stats["lastConfirmedEntry"] = str(ledger.last_confirmed)
    else:
        stats["msgDropRate"] = sum(s["msgDropRate"] for s in subscriptions.values())
    return stats


def _publisher_stats(topic: Any, producer: Any) -> dict:
    rate, throughput = topic.rates.get(producer, "msgIn"), topic.rates.get(producer, "bytesIn")
    return {
        "producerId": producer.producer_id,
        "producerName": producer.name,
        "address": producer.address,
        "connectedSince": producer.connected_since,
        "msgRateIn": rate,
        "msgThroughputIn": throughput,
        "averageMsgSize": throughput / rate if rate else 0.0,
        "msgInCounter": producer.messages_in,
        "bytesInCounter": producer.bytes_in,
    }


def _subscription_stats(topic: Any, subscription: Any) -> dict:
    rates = topic.rates
    consumers = [_consumer_stats(topic, c) for c in subscription.consumers]
    cursor = getattr(subscription, "cursor", None)
    stats = {
        "type": subscription.sub_type,
        "msgBacklog": cursor.backlog_entries if cursor is not None else 0,
        "msgRateOut": sum(c["msgRateOut"] for c in consumers),
        "msgThroughputOut": sum(c["msgThroughputOut"] for c in consumers),
        "msgRateRedeliver": rates.get(subscription, "redeliver"),
        "msgOutCounter": sum(c["msgOutCounter"] for c in consumers),
        "bytesOutCounter": sum(c["bytesOutCounter"] for c in consumers),
        "unackedMessages": sum(c["unackedMessages"] for c in consumers),
        "blockedSubscriptionOnUnackedMsgs": bool(getattr(subscription, "blocked_on_unacked", False)),
        "consumers": consumers,
    }
    if cursor is None:
        stats["msgDropRate"] = rates.get(subscription, "drop")
        stats["isDurable"] = False
        return stats
    stats["isDurable"] = bool(getattr(cursor, "durable", True))
    stats["markDeletePosition"] = str(cursor.mark_delete)
    stats["readPosition"] = str(cursor.read_position)
    for field, attribute in (
        ("entryCacheHitsTailing", "cache_hits_tailing"),
        ("entryCacheHitsCatchUp", "cache_hits_catch_up"),
        ("entryCacheMissesTailing", "cache_misses_tailing"),
        ("entryCacheMissesCatchUp", "cache_misses_catch_up"),
    ):
        stats[field] = getattr(cursor, attribute, 0)
    return stats


def _consumer_stats(topic: Any, consumer: Any) -> dict:
    rates = topic.rates
    return {
        "consumerName": consumer.name,
        "consumerId": getattr(consumer, "consumer_id", -1),
        "address": getattr(getattr(consumer, "connection", None), "peer", ""),
        "availablePermits": consumer.permits,
        "unackedMessages": consumer.unacked_messages,
        "blockedConsumerOnUnackedMsgs": bool(getattr(consumer, "blocked_on_unacked", False)),
        "priorityLevel": getattr(consumer, "priority_level", 0),
        "msgRateOut": rates.get(consumer, "msgOut"),
        "msgThroughputOut": rates.get(consumer, "bytesOut"),
        "msgOutCounter": consumer.messages_out,
        "bytesOutCounter": consumer.bytes_out,
    }


# -- internal stats -------------------------------------------------------------------------------


def internal_stats(topic: Any) -> dict:
    """``GET …/internalStats``: the managed ledger's ledgers and its cursors' positions."""
    ledger = getattr(topic, "ledger", None)
    if ledger is None:  # non-persistent: nothing stored
        return {
            "entriesAddedCounter": topic.counters.messages_in,
            "numberOfEntries": 0,
            "totalSize": 0,
            "currentLedgerEntries": 0,
            "currentLedgerSize": 0,
            "lastLedgerCreatedTimestamp": "",
            "lastConfirmedEntry": "-1:-1",
            "state": "Open",
            "ledgers": [],
            "cursors": {},
        }
    ledgers = ledger_list(topic)
    last = ledgers[-1] if ledgers else {"entries": 0, "size": 0, "timestamp": 0}
    created = ledger.ledgers[-1].timestamp_ms if ledger.ledgers else 0
    return {
        "entriesAddedCounter": getattr(ledger, "entries_added", 0),
        "numberOfEntries": sum(item["entries"] for item in ledgers),
        "totalSize": sum(item["size"] for item in ledgers),
        "currentLedgerEntries": last["entries"],
        "currentLedgerSize": last["size"],
        "lastLedgerCreatedTimestamp": _timestamp(created),
        "lastConfirmedEntry": str(ledger.last_confirmed),
        "state": getattr(getattr(ledger, "state", None), "value", "Open"),
        "ledgers": [
            {"ledgerId": item["ledgerId"], "entries": item["entries"], "size": item["size"], "offloaded": False}
            for item in ledgers
        ],
        "cursors": {cursor.name: _cursor_stats(topic, cursor) for cursor in _cursors(topic)},
    }


def ledger_list(topic: Any) -> list[dict]:
    """Each ledger's entries and bytes. The open ledger's metadata says nothing until it is
    closed: its entries come from the last confirmed position, its bytes from the managed
    ledger's total less the closed ledgers'."""
    ledger = topic.ledger
    infos = ledger.ledgers
    closed_bytes = sum(info.size for info in infos if info.entries is not None)
    last = ledger.last_confirmed
    result = []
    for info in infos:
        entries, size = info.entries, info.size
        if entries is None:
            entries = last.entry_id + 1 if last.ledger_id == info.ledger_id else 0
            size = max(0, getattr(ledger, "total_size_bytes", closed_bytes) - closed_bytes)
        result.append({"ledgerId": info.ledger_id, "entries": entries, "size": size, "timestamp": info.timestamp_ms})
    return result


def _ledger_totals(topic: Any) -> tuple[int, int]:
    ledgers = ledger_list(topic)
    return sum(item["entries"] for item in ledgers), sum(item["size"] for item in ledgers)


def storage_size(topic: Any) -> int:
    return _ledger_totals(topic)[1] if getattr(topic, "ledger", None) is not None else 0


def backlog_size(topic: Any) -> int:
    """Pulsar's estimate: the largest subscription backlog (entries) × the average entry size."""
    if getattr(topic, "ledger", None) is None:
        return 0
    entries, size = _ledger_totals(topic)
    backlog = max(
        (s.cursor.backlog_entries for s in topic.subscriptions.values() if getattr(s, "cursor", None) is not None),
        default=0,
    )
    return size * min(backlog, entries) // entries if entries else 0


def _cursors(topic: Any) -> list[Any]:
    live = getattr(topic.ledger, "cursors", None)
    if isinstance(live, dict):
        live = list(live.values())
    cursors = list(live) if live else []
    names = {c.name for c in cursors}
    for subscription in topic.subscriptions.values():
        cursor = getattr(subscription, "cursor", None)
        if cursor is not None and cursor.name not in names:
            cursors.append(cursor)
            names.add(cursor.name)
    return cursors


def _cursor_stats(topic: Any, cursor: Any) -> dict:
    holes = _runs(getattr(cursor, "individually_deleted", ()))
    total = sum(item["entries"] for item in ledger_list(topic))
    backlog = cursor.backlog_entries
    return {
        "markDeletePosition": str(cursor.mark_delete),
        "readPosition": str(cursor.read_position),
        "individuallyDeletedMessages": "["
        + ", ".join(f"({first.ledger_id}:{first.entry_id - 1}..{last}]" for first, last in holes)
        + "]",
        "totalNonContiguousDeletedMessagesRange": len(holes),
        "messagesConsumedCounter": max(0, total - backlog),
        "numberOfEntriesSinceFirstNotAckedMessage": topic.ledger.count_entries(
            cursor.mark_delete, topic.ledger.last_confirmed
        ),
        "durable": bool(getattr(cursor, "durable", True)),
        "state": "Open",
    }


def _runs(positions: Iterable[Any]) -> list[tuple[Position, Position]]:
    """Consecutive positions of one ledger as ``(first, last)`` runs (Pulsar prints ``(first-1..last]``)."""
    runs: list[list[Position]] = []
    for position in sorted(p for p in positions if isinstance(p, tuple)):
        if runs and runs[-1][1].ledger_id == position.ledger_id and runs[-1][1].entry_id == position.entry_id - 1:
            runs[-1][1] = position
        else:
            runs.append([position, position])
    return [(first, last) for first, last in runs]


def _timestamp(ms: int) -> str:
    if not ms:
        return ""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")
