"""Key_Shared (AUTO_SPLIT): entries of one key always go to the same consumer, in order
(Pulsar's PersistentStickyKeyDispatcherMultipleConsumers with consistent hashing, §5.3).

- Key of an entry: the key of its first message; a message without a key counts as
  ``NONE_KEY`` (Pulsar's name). An entry is one producer batch and is never split, so a batch
  whose messages have different keys goes whole by its first message's key. Pulsar's
  key-based batching keeps one key per batch for exactly this reason.
- Hash: Murmur3-32 (seed 0) of the key's UTF-8 bytes, masked to 31 bits as Pulsar's
  ``Murmur3_32Hash``. The ``mmh3`` package computes it.
- Ring: each consumer owns ``subscriptionKeySharedConsistentHashingReplicaPoints`` points,
  the hashes of ``name + str(i)``; a key goes to the owner of the first point at or after its
  hash (wrapping). Consumers with the same name share points; the key hash picks among them.
- Order when the ring changes: entries of a leaving consumer go to the replay set, which is
  read first, and a newer entry whose key still has an older entry waiting there is held
  back (into the replay set) rather than overtaking it. A consumer that joins while others
  exist is "recently joined" (as in classic Pulsar): it gets no entry read after the moment
  it joined until every entry read before that moment is acknowledged (mark-delete reached
  it), because those may still sit unacknowledged at the consumer that owned its keys before.
- When no replay entry can be sent (their consumers are out of permits or recently joined)
  the dispatcher reads ahead from the cursor for the other keys, up to
  ``LOOK_AHEAD_MAX_REPLAY_ENTRIES`` entries waiting in the replay set (Pulsar:
  ``keySharedLookAheadMsgInReplayThresholdPerSubscription``, counted in messages there).

Invariants:

- an entry goes to the consumer its key's hash selects on the ring, never to another;
- an entry is never sent before an older entry of the same key that waits in the replay set;
- a recently joined consumer gets no entry read after it joined until the mark-delete
  position reached its join point.
"""

from __future__ import annotations

import bisect

import mmh3

from minipulsar import entry_format
from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.topics.base import Consumer, DispatchCursor
from minipulsar.broker.topics.dispatch_settings import DispatchSettings
from minipulsar.broker.topics.dispatcher import entries_within_permits
from minipulsar.broker.topics.dispatcher_shared import SharedDispatcher
from minipulsar.broker.topics.redelivery import RedeliveryTracker

NONE_KEY = entry_format.NONE_KEY
LOOK_AHEAD_MAX_REPLAY_ENTRIES = 20_000
KEY_SHARED_MODES = ("AUTO_SPLIT",)


def key_hash(key: bytes) -> int:
    """Pulsar's ``Murmur3_32Hash.makeHash``: murmur3 x86 32-bit, seed 0, sign bit cleared."""
    return mmh3.hash(key, 0, signed=False) & 0x7FFFFFFF


def sticky_key(payload: bytes) -> bytes:
    """The key an entry is routed by (``NONE_KEY`` if it has none), in either entry format:
    :func:`minipulsar.entry_format.sticky_key`, which reads no more of the entry than it must."""
    return entry_format.sticky_key(payload)


class ConsistentHashRing:
    """Consumers on a hash ring, ``points`` points each."""

    def __init__(self, points: int) -> None:
        self.points = points
        self._owners: dict[int, list[Consumer]] = {}
        self._sorted: list[int] = []

    def add(self, consumer: Consumer) -> None:
        for i in range(self.points):
            point = key_hash(f"{consumer.name}{i}".encode())
            owners = self._owners.setdefault(point, [])
            owners.append(consumer)
            owners.sort(key=lambda c: c.consumer_id)
        self._sorted = sorted(self._owners)

    def remove(self, consumer: Consumer) -> None:
        for point in [p for p, owners in self._owners.items() if consumer in owners]:
            owners = self._owners[point]
            owners.remove(consumer)
            if not owners:
                del self._owners[point]
        self._sorted = sorted(self._owners)

    def select(self, hash_value: int) -> Consumer | None:
        if not self._sorted:
            return None
        index = bisect.bisect_left(self._sorted, hash_value)
        owners = self._owners[self._sorted[index % len(self._sorted)]]
        return owners[hash_value % len(owners)]


class KeySharedDispatcher(SharedDispatcher):
    def __init__(self, cursor: DispatchCursor, settings: DispatchSettings, redelivery: RedeliveryTracker) -> None:
        super().__init__(cursor, settings, redelivery)
        self.ring = ConsistentHashRing(settings.key_shared_replica_points)
        self.recently_joined: dict[Consumer, Position] = {}
        """Consumer → the last position read when it joined (ascending in insertion order)."""
        self._pending_hashes: dict[Position, int] = {}
        self._last_read: Position | None = None
        self._replay_stuck = False

    # -- consumers ------------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self.ring.add(consumer)
        if self.consumers and self._last_read is not None:
            self.recently_joined[consumer] = self._last_read
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer not in self.consumers:
            return
        self.ring.remove(consumer)  # first: its entries must hash to the others now
        self.recently_joined.pop(consumer, None)
        if len(self.consumers) <= 2:  # one left: nobody to keep order against
            self.recently_joined.clear()
        super().remove_consumer(consumer)

    def read_more(self) -> None:
        self._replay_stuck = False  # permits, acks or consumers changed: try the replay set again
        super().read_more()

    # -- acknowledgements -----------------------------------------------------------------------

    def acknowledged(self, consumer: Consumer | None, positions: list[Position]) -> None:
        super().acknowledged(consumer, positions)
        for position in positions:
            self._pending_hashes.pop(position, None)

    def acks_applied(self) -> None:
        mark_delete = self.cursor.mark_delete
        released = False
        for consumer, joined_at in list(self.recently_joined.items()):
            if joined_at > mark_delete:
                break
            del self.recently_joined[consumer]
            released = True
        super().acks_applied()
        if released:
            self.read_more()

    def _pending_key_hash(self, position: Position) -> int:
        return self._pending_hashes.pop(position, 0)

    def reset_after_seek(self) -> None:
        super().reset_after_seek()
        self._pending_hashes.clear()
        self.recently_joined.clear()
        self._last_read = None

    # -- reading --------------------------------------------------------------------------------

    def _consumers_to_read_for(self) -> list[Consumer]:
        """A recently joined consumer can only take replayed entries: new reads are not for it."""
        receiving = super()._consumers_to_read_for()
        if self.replay and not self._replay_stuck:
            return receiving
        return [c for c in receiving if c not in self.recently_joined]

    async def _read(self, max_entries: int) -> list[Entry] | None:
        if self.replay and not self._replay_stuck:
            self._read_from_replay = True
            return await self._read_replay(max_entries)
        self._read_from_replay = False
        if len(self.replay) >= LOOK_AHEAD_MAX_REPLAY_ENTRIES:
            return None
        entries = await self._read_from_cursor(max_entries)
        if entries and (self._last_read is None or entries[-1].position > self._last_read):
            self._last_read = entries[-1].position
        return entries

    # -- sending --------------------------------------------------------------------------------

    def _dispatch(self, entries: list[Entry]) -> None:
        replay, from_replay = self.replay, self._read_from_replay
        groups: dict[Consumer, list[tuple[Entry, int]]] = {}
        for entry in entries:
            hashed = key_hash(sticky_key(entry.payload))
            consumer = self.ring.select(hashed)
            if (
                consumer is None
                or (not from_replay and hashed in replay.hash_counts)  # an older one of this key waits
                or self._held_for_join(consumer, entry.position)
            ):
                replay.add(entry.position, hashed)
                continue
            groups.setdefault(consumer, []).append((entry, hashed))
        sent = 0
        settings = self.settings
        for consumer, items in groups.items():
            batch = [entry for entry, _ in items]
            count = 0
            if consumer.can_receive() and not self.blocked_on_unacked:
                count = entries_within_permits(
                    self._permits_within_limits(consumer), batch, settings.precise_flow_control, len(batch)
                )
            if count:
                consumer.send_entries(batch[:count], self.redelivery, self.batch_acks)
                for entry, hashed in items[:count]:
                    self._pending_hashes[entry.position] = hashed
                self._check_unacked_limits(consumer)
                sent += count
            for entry, hashed in items[count:]:
                replay.add(entry.position, hashed)
        if from_replay and not sent:
            self._replay_stuck = True  # read ahead for other keys until something changes

    def _held_for_join(self, consumer: Consumer, position: Position) -> bool:
        joined_at = self.recently_joined.get(consumer)
        return joined_at is not None and position > joined_at
