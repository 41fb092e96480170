"""Topic stats with Pulsar's field names: ``pulsar-admin topics stats`` and ``stats-internal``.

Counters are read as they are now; rates (``msgRateIn`` …) are those of the last
``statsUpdateFrequencyInSecs`` interval (:func:`sample_rates`, called by the broker's timer).
The same functions serve persistent topics (a managed ledger, cursors) and non-persistent ones
(no storage; their subscriptions count dropped messages instead of a backlog).

Invariants:

- a topic is read through :class:`~broker.topics.base.Topic` only; what a non-persistent
  topic lacks (``ledger``, a subscription's ``cursor``) is None and reported as Pulsar does
  for it (no storage fields, ``msgDropRate`` instead);
- nothing here writes to a topic except :func:`sample_rates`, to its rate table.
"""

from __future__ import annotations

import datetime
from typing import Any

from minipulsar.broker.managed_ledger.ledger import ManagedLedger
from minipulsar.broker.topics.base import Consumer, CursorStats, Subscription, Topic
from minipulsar.broker.topics.counters import Publisher

# -- rates ----------------------------------------------------------------------------------------


def sample_rates(topic: Topic, elapsed_s: float) -> None:
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
        rates.sample(subscription, "redeliver", subscription.msg_redeliver_counter, elapsed_s)
        rates.sample(subscription, "drop", subscription.msg_drop_counter, elapsed_s)
        for consumer in subscription.consumers:
            rates.sample(consumer, "msgOut", consumer.messages_out, elapsed_s)
            rates.sample(consumer, "bytesOut", consumer.bytes_out, elapsed_s)
    rates.end()


# -- stats ----------------------------------------------------------------------------------------


def topic_stats(topic: Topic) -> dict[str, Any]:
    """``GET …/stats``: rates, counters, storage, publishers, subscriptions with their consumers."""
    rates, counters = topic.rates, topic.counters
    rate_in, throughput_in = rates.get(topic, "msgIn"), rates.get(topic, "bytesIn")
    ledger = topic.ledger
    subscriptions = {name: _subscription_stats(topic, sub) for name, sub in topic.subscriptions.items()}
    stats: dict[str, Any] = {
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
        "deduplicationStatus": "Enabled" if topic.deduplication is not None else "Disabled",
    }
    if ledger is not None:
        stats["entryCacheHits"] = ledger.cache_hits
        stats["entryCacheMisses"] = ledger.cache_misses
        # Not in Pulsar's topic stats (it has them in internal stats only); minipulsar adds them.
        stats["ledgers"] = [info.to_json() for info in ledger.ledgers]
        stats["lastConfirmedEntry"] = str(ledger.last_confirmed)
    else:
        stats["msgDropRate"] = sum(s["msgDropRate"] for s in subscriptions.values())
    return stats


def _publisher_stats(topic: Topic, producer: Publisher) -> dict[str, Any]:
    rate, throughput = topic.rates.get(producer, "msgIn"), topic.rates.get(producer, "bytesIn")
    return {
        "producerId": producer.producer_id,
        "producerName": producer.name,
        "address": producer.address,
        "connectedSince": producer.connected_since,
        "clientVersion": producer.client_version,
        "accessMode": producer.access_mode,
        "msgRateIn": rate,
        "msgThroughputIn": throughput,
        "averageMsgSize": throughput / rate if rate else 0.0,
        "msgInCounter": producer.messages_in,
        "bytesInCounter": producer.bytes_in,
    }


def _subscription_stats(topic: Topic, subscription: Subscription) -> dict[str, Any]:
    rates = topic.rates
    consumers = [_consumer_stats(topic, c) for c in subscription.consumers]
    cursor = subscription.cursor
    stats: dict[str, Any] = {
        "type": subscription.sub_type,
        "msgBacklog": cursor.backlog_entries if cursor is not None else 0,
        "msgRateOut": sum(c["msgRateOut"] for c in consumers),
        "msgThroughputOut": sum(c["msgThroughputOut"] for c in consumers),
        "msgRateRedeliver": rates.get(subscription, "redeliver"),
        "msgOutCounter": sum(c["msgOutCounter"] for c in consumers),
        "bytesOutCounter": sum(c["bytesOutCounter"] for c in consumers),
        "unackedMessages": sum(c["unackedMessages"] for c in consumers),
        "blockedSubscriptionOnUnackedMsgs": subscription.blocked_on_unacked,
        "consumers": consumers,
    }
    if cursor is None:
        stats["msgDropRate"] = rates.get(subscription, "drop")
        stats["isDurable"] = False
        return stats
    stats["isDurable"] = cursor.durable
    stats["markDeletePosition"] = str(cursor.mark_delete)
    stats["readPosition"] = str(cursor.read_position)
    stats["entryCacheHitsTailing"] = cursor.cache_hits_tailing
    stats["entryCacheHitsCatchUp"] = cursor.cache_hits_catch_up
    stats["entryCacheMissesTailing"] = cursor.cache_misses_tailing
    stats["entryCacheMissesCatchUp"] = cursor.cache_misses_catch_up
    return stats


def _consumer_stats(topic: Topic, consumer: Consumer) -> dict[str, Any]:
    rates = topic.rates
    return {
        "consumerName": consumer.name,
        "consumerId": consumer.consumer_id,
        "address": consumer.connection.peer,
        "connectedSince": consumer.connected_since,
        "clientVersion": consumer.connection.client_version,
        "availablePermits": consumer.permits,
        "unackedMessages": consumer.unacked_messages,
        "blockedConsumerOnUnackedMsgs": consumer.blocked_on_unacked,
        "priorityLevel": consumer.priority_level,
        "msgRateOut": rates.get(consumer, "msgOut"),
        "msgThroughputOut": rates.get(consumer, "bytesOut"),
        "msgOutCounter": consumer.messages_out,
        "bytesOutCounter": consumer.bytes_out,
    }


# -- internal stats -------------------------------------------------------------------------------


def internal_stats(topic: Topic) -> dict[str, Any]:
    """``GET …/internalStats``: the managed ledger's ledgers and its cursors' positions."""
    ledger = topic.ledger
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
    ledgers = ledger_list(ledger)
    last = ledgers[-1] if ledgers else {"entries": 0, "size": 0, "timestamp": 0}
    created = ledger.ledgers[-1].timestamp_ms if ledger.ledgers else 0
    return {
        "entriesAddedCounter": ledger.entries_added,
        "numberOfEntries": sum(item["entries"] for item in ledgers),
        "totalSize": sum(item["size"] for item in ledgers),
        "currentLedgerEntries": last["entries"],
        "currentLedgerSize": last["size"],
        "lastLedgerCreatedTimestamp": _timestamp(created),
        "lastConfirmedEntry": str(ledger.last_confirmed),
        "state": ledger.state.value,
        "ledgers": [
            {"ledgerId": item["ledgerId"], "entries": item["entries"], "size": item["size"], "offloaded": False}
            for item in ledgers
        ],
        "cursors": {cursor.name: _cursor_stats(ledger, cursor) for cursor in _cursors(topic, ledger)},
    }


def ledger_list(ledger: ManagedLedger) -> list[dict[str, int]]:
    """Each ledger's entries and bytes. The open ledger's metadata says nothing until it is
    closed: its entries come from the last confirmed position, its bytes from the managed
    ledger's total less the closed ledgers'."""
    infos = ledger.ledgers
    closed_bytes = sum(info.size for info in infos if info.entries is not None)
    last = ledger.last_confirmed
    result = []
    for info in infos:
        entries, size = info.entries, info.size
        if entries is None:
            entries = last.entry_id + 1 if last.ledger_id == info.ledger_id else 0
            size = max(0, ledger.total_size_bytes - closed_bytes)
        result.append({"ledgerId": info.ledger_id, "entries": entries, "size": size, "timestamp": info.timestamp_ms})
    return result


def _ledger_totals(ledger: ManagedLedger) -> tuple[int, int]:
    ledgers = ledger_list(ledger)
    return sum(item["entries"] for item in ledgers), sum(item["size"] for item in ledgers)


def storage_size(topic: Topic) -> int:
    return _ledger_totals(topic.ledger)[1] if topic.ledger is not None else 0


def backlog_entries(topic: Topic) -> int:
    """Entries not yet acknowledged, summed over the subscriptions (0 on a non-persistent topic)."""
    return sum(cursor.backlog_entries for cursor in _subscription_cursors(topic))


def backlog_size(topic: Topic) -> int:
    """Pulsar's estimate: the largest subscription backlog (entries) × the average entry size."""
    if topic.ledger is None:
        return 0
    entries, size = _ledger_totals(topic.ledger)
    backlog = max((cursor.backlog_entries for cursor in _subscription_cursors(topic)), default=0)
    return size * min(backlog, entries) // entries if entries else 0


def _subscription_cursors(topic: Topic) -> list[CursorStats]:
    return [s.cursor for s in topic.subscriptions.values() if s.cursor is not None]


def _cursors(topic: Topic, ledger: ManagedLedger) -> list[CursorStats]:
    """The managed ledger's live cursors, then any subscription's cursor it no longer lists."""
    cursors: list[CursorStats] = list(ledger.cursors)
    names = {c.name for c in cursors}
    for cursor in _subscription_cursors(topic):
        if cursor.name not in names:
            cursors.append(cursor)
            names.add(cursor.name)
    return cursors


def _cursor_stats(ledger: ManagedLedger, cursor: CursorStats) -> dict[str, Any]:
    holes = list(cursor.individually_deleted.ranges())
    total = sum(item["entries"] for item in ledger_list(ledger))
    backlog = cursor.backlog_entries
    return {
        "markDeletePosition": str(cursor.mark_delete),
        "readPosition": str(cursor.read_position),
        "individuallyDeletedMessages": "["
        + ", ".join(f"({first.ledger_id}:{first.entry_id - 1}..{last}]" for first, last in holes)
        + "]",
        "totalNonContiguousDeletedMessagesRange": len(holes),
        "messagesConsumedCounter": max(0, total - backlog),
        "numberOfEntriesSinceFirstNotAckedMessage": ledger.count_entries(cursor.mark_delete, ledger.last_confirmed),
        "durable": cursor.durable,
        "state": "Open",
    }


def _timestamp(ms: int) -> str:
    if not ms:
        return ""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")
