"""Topic, Subscription and Consumer: what the rest of the broker reads of them, whatever the topic stores.

The connection handlers, the stats and /metrics, the admin REST, an unload and the load
report see a topic only through these protocols. :class:`PersistentTopic` with its
:class:`PersistentSubscription` (a managed ledger, cursors) and :class:`NonPersistentTopic`
with its :class:`NonPersistentSubscription` (nothing stored) implement them.

Invariants:

- what one kind does not have is explicit, never probed: a non-persistent topic's ``ledger``
  and ``deduplication`` are None, as is its subscriptions' ``cursor``; a persistent
  subscription drops nothing (``msg_drop_counter`` stays 0), a non-persistent one redelivers
  nothing (``msg_redeliver_counter`` stays 0);
- a subscription's consumers are :class:`Consumer` s — :class:`~broker.topics.consumer.ServerConsumer`
  for both kinds of topic; dispatch, the stats and an unload read only what :class:`Consumer` lists;
- counters only grow; :meth:`Topic.update_rates` turns them into the rates the stats report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from minipulsar.errors import MiniPulsarError, ServiceNotReadyError

if TYPE_CHECKING:
    from minipulsar.broker.dedup import MessageDeduplication
    from minipulsar.broker.managed_ledger.entry_reader import CursorReadCounters
    from minipulsar.broker.managed_ledger.ledger import ManagedLedger
    from minipulsar.broker.managed_ledger.position import Entry, Position
    from minipulsar.broker.managed_ledger.range_set import PositionRangeSet
    from minipulsar.broker.topics.batch_index_acks import BatchIndexAcks
    from minipulsar.broker.topics.consumer import ConsumerConnection, RedeliveryCounts
    from minipulsar.broker.topics.counters import TopicCounters
    from minipulsar.broker.topics.rates import RateTable
    from minipulsar.topic_name import TopicName


PublishCallback = Callable[["Position | None", BaseException | None], None]
"""Told a published entry's outcome once: ``(position, None)`` or ``(None, error)``."""


def future_to_callback(callback: PublishCallback, future: asyncio.Future[Position]) -> None:
    """Hand a done publish future's outcome to ``callback`` (a cancelled one as a failure)."""
    if future.cancelled():
        callback(None, ServiceNotReadyError("the write was cancelled"))
    elif (error := future.exception()) is not None:
        callback(None, error)
    else:
        callback(future.result(), None)


class Consumer(Protocol):
    """One consumer of a subscription, as dispatch, the stats and an unload see it."""

    consumer_id: int
    name: str
    connection: ConsumerConnection
    priority_level: int
    """Lower is preferred: Failover's active consumer and Shared's round-robin level."""
    permits: int
    unacked_messages: int
    blocked_on_unacked: bool
    avg_messages_per_entry: float | None
    messages_out: int
    bytes_out: int
    connected_since: str
    """When it subscribed (ISO 8601, UTC), as the stats show it."""

    @property
    def pending_acks(self) -> Mapping[Position, int]:
        """Entries sent to it and not acknowledged: position → messages in the entry."""
        ...

    @property
    def writable(self) -> bool:
        """Its connection takes writes now."""
        ...

    def can_receive(self) -> bool: ...

    def send_entries(
        self, entries: list[Entry], redelivery: RedeliveryCounts | None = None, batch_acks: BatchIndexAcks | None = None
    ) -> int: ...

    def acked(self, positions: Iterable[Position]) -> None: ...

    def acked_up_to(self, position: Position) -> None: ...

    def take_pending(self, positions: Iterable[Position] | None = None) -> list[Position]: ...


class CursorStats(Protocol):
    """What the stats read of a subscription's cursor (a ManagedCursor)."""

    @property
    def name(self) -> str: ...

    @property
    def durable(self) -> bool: ...

    @property
    def mark_delete(self) -> Position: ...

    @property
    def read_position(self) -> Position: ...

    @property
    def backlog_entries(self) -> int: ...

    @property
    def individually_deleted(self) -> PositionRangeSet: ...

    cache_hits_tailing: int
    """Entries read from the entry cache near the tail (counted by the managed ledger's reads)."""
    cache_hits_catch_up: int
    cache_misses_tailing: int
    cache_misses_catch_up: int


class CursorLedger(Protocol):
    """What a subscription reads of its cursor's managed ledger: where entries are, and when more come."""

    @property
    def first_position(self) -> Position: ...

    @property
    def last_confirmed(self) -> Position: ...

    def next_position(self, position: Position) -> Position: ...

    async def read_entries(
        self, start: Position, max_entries: int, max_bytes: int | None = None, cursor: CursorReadCounters | None = None
    ) -> list[Entry]:
        """Up to ``max_entries`` entries from ``start`` (a replay reads through here), counted on ``cursor``."""
        ...

    def wait_for_entries(self) -> asyncio.Future[None]: ...

    async def find_position_by_publish_time(self, publish_time_ms: int) -> Position: ...


class DispatchCursor(CursorStats, Protocol):
    """What a persistent subscription and its dispatcher use of a ManagedCursor."""

    active: bool
    """Read now: the entry cache keeps entries for active cursors."""

    @property
    def ledger(self) -> CursorLedger: ...

    def has_more_entries(self) -> bool: ...

    async def read_entries(self, max_entries: int, max_bytes: int | None = None) -> list[Entry]: ...

    def is_acked(self, position: Position) -> bool: ...

    def rewind(self) -> None: ...

    def seek(self, read_position: Position) -> None: ...

    async def reset(self, position: Position) -> None: ...

    async def acknowledge(self, positions: list[Position]) -> None: ...

    async def acknowledge_cumulative(self, position: Position) -> None: ...

    async def close(self) -> None: ...

    async def delete(self) -> None: ...


class Subscription(Protocol):
    """One subscription of a topic and the consumers attached to it."""

    @property
    def name(self) -> str: ...

    @property
    def sub_type(self) -> str:
        """Exclusive | Shared | Failover | Key_Shared, as the attached consumers asked."""
        ...

    @property
    def consumers(self) -> Sequence[Consumer]: ...

    @property
    def cursor(self) -> CursorStats | None:
        """The cursor a persistent subscription reads with; None on a non-persistent one."""
        ...

    @property
    def durable(self) -> bool: ...

    @property
    def blocked_on_unacked(self) -> bool:
        """Dispatch stopped at ``maxUnackedMessagesPerSubscription``."""
        ...

    @property
    def msg_redeliver_counter(self) -> int: ...

    @property
    def msg_drop_counter(self) -> int: ...

    def remove_consumer(self, consumer: Consumer) -> None: ...

    def flow(self, consumer: Consumer, permits: int) -> None:
        """FLOW: ``consumer`` may take ``permits`` more messages."""
        ...

    def read_more(self) -> None:
        """Something may be dispatched again (a consumer's socket takes writes again)."""
        ...

    async def acknowledge(self, consumer: Consumer | None, positions: list[Position], cumulative: bool) -> None: ...

    def acknowledge_batch_indexes(self, consumer: Consumer, acks: list[tuple[Position, int]]) -> list[Position]:
        """``consumer``'s acks of parts of batch entries it was sent (an official client's
        ``ack_set``: the bits still unacknowledged); returns the entries now acknowledged
        whole, to acknowledge as any."""
        ...

    def redeliver_unacknowledged(self, consumer: Consumer, positions: list[Position] | None = None) -> None: ...

    async def close(self) -> None: ...


class Topic(Protocol):
    """A loaded topic: its producers' counters, its subscriptions, publishing and subscribing."""

    @property
    def name(self) -> TopicName: ...

    @property
    def counters(self) -> TopicCounters: ...

    @property
    def rates(self) -> RateTable: ...

    @property
    def subscriptions(self) -> Mapping[str, Subscription]: ...

    @property
    def ledger(self) -> ManagedLedger | None:
        """The managed ledger a persistent topic stores its entries in; None when nothing is stored."""
        ...

    @property
    def deduplication(self) -> MessageDeduplication | None:
        """Set on a persistent topic when ``brokerDeduplicationEnabled``."""
        ...

    @property
    def last_message_id(self) -> Position:
        """GET_LAST_MESSAGE_ID: the last entry stored (persistent) or delivered (non-persistent)."""
        ...

    def publish(
        self,
        payload: bytes,
        num_messages: int,
        producer_name: str | None = None,
        sequence_id: int = -1,
        highest_sequence_id: int = -1,
    ) -> asyncio.Future[Position]:
        """Take one entry (a batch); the future completes with its position, or fails."""
        ...

    def publish_then(
        self,
        payload: bytes,
        num_messages: int,
        producer_name: str | None,
        sequence_id: int,
        highest_sequence_id: int,
        callback: PublishCallback,
    ) -> None:
        """:meth:`publish` for the hot path: ``callback(position, None)`` or ``callback(None,
        error)`` once, in the order the entries are stored, without a future where it can."""
        ...

    async def subscribe(
        self,
        consumer: Consumer,
        subscription_name: str,
        sub_type: str,
        start_at_earliest: bool,
        *,
        durable: bool = True,
        start_position: Position | None = None,
    ) -> Subscription:
        """Attach ``consumer``, creating the subscription when it does not exist."""
        ...

    async def unsubscribe(self, subscription_name: str, consumer: Consumer) -> None: ...

    def fence(self, error: MiniPulsarError) -> None:
        """This broker lost the topic (its metadata session expired): write nothing more to the
        metadata store; adds queued or issued later fail with ``error``."""
        ...

    async def close(self) -> None: ...

    def stats(self) -> dict[str, Any]: ...

    def internal_stats(self) -> dict[str, Any]: ...

    def update_rates(self, elapsed_s: float) -> None: ...
