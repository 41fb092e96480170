"""The metadata layer's client-side metrics, with Pulsar's names (``MetadataStoreStats``).

Every process that opens a store exports, per store ``name`` (Pulsar's
``MetadataStoreConfig.METADATA_STORE``, ``metadata-store``, for brokers, bookies and
AutoRecovery alike, as Pulsar's BookKeeper metadata driver names its store):

- ``pulsar_metadata_store_ops_latency_ms{name, type, status}``: a histogram of each call's
  latency in milliseconds with Pulsar's buckets. ``type`` is Pulsar's ``get``, ``put``,
  ``del``, plus ``children`` and ``exists`` (Pulsar serves those from a cache and does not
  time them; minipulsar calls the store for each); ``status`` is ``success`` or ``fail`` —
  ``fail`` for any raised error, a lost compare-and-set (BadVersion) included, as in Pulsar;
  a ``get`` of a missing key succeeds;
- ``pulsar_metadata_store_put_bytes_total{name}``: value bytes of successful puts;
- ``pulsar_metadata_store_notifications_total{name, type}`` and
  ``pulsar_metadata_store_session_events_total{name, event}``: minipulsar's own, in Pulsar's
  family (Pulsar counts neither). ``type`` is Pulsar's ``NotificationType`` name
  (``Created``, ``Modified``, ``Deleted``, ``ChildrenChanged``), ``event`` its
  ``SessionEvent`` name (``ConnectionLost``, ``Reconnected``, ``SessionLost``,
  ``SessionReestablished``).

Label children are bound once per store, so a call costs one ``observe``. Several stores of
one name in a process (tests, an admin CLI beside a server) add to the same series; closing a
store leaves them (unlike Pulsar, which removes them, since here another store of that name
may still be counting).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from minipulsar.metadata.store import NotificationType, SessionEvent

DEFAULT_NAME = "metadata-store"
"""Pulsar's ``MetadataStoreConfig.METADATA_STORE``."""

LATENCY_BUCKETS_MS = (1, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
"""Pulsar's ``MetadataStoreStats.BUCKETS``."""

OPS_LATENCY = Histogram(
    "pulsar_metadata_store_ops_latency_ms",
    "Latency of metadata store calls in milliseconds, by store name, call type and status",
    ("name", "type", "status"),
    buckets=LATENCY_BUCKETS_MS,
)
PUT_BYTES = Counter("pulsar_metadata_store_put_bytes", "Value bytes written by successful metadata puts", ("name",))
NOTIFICATIONS = Counter(
    "pulsar_metadata_store_notifications",
    "Watch notifications the store received, by Pulsar's NotificationType (minipulsar's own metric)",
    ("name", "type"),
)
SESSION_EVENTS = Counter(
    "pulsar_metadata_store_session_events",
    "Session events of the store, by Pulsar's SessionEvent (minipulsar's own metric)",
    ("name", "event"),
)

OP_TYPES = ("get", "put", "del", "children", "exists")
_PULSAR_NOTIFICATION_TYPE = {
    NotificationType.CREATED: "Created",
    NotificationType.MODIFIED: "Modified",
    NotificationType.DELETED: "Deleted",
    NotificationType.CHILDREN_CHANGED: "ChildrenChanged",
}


class MetadataStoreStats:
    """The bound series of one store name: ``ok[type]`` and ``failed[type]`` histograms, the
    put-bytes counter, and one counter per notification type and session event."""

    __slots__ = ("failed", "name", "notifications", "ok", "put_bytes", "session_events")

    def __init__(self, name: str = DEFAULT_NAME) -> None:
        self.name = name
        self.ok = {op: OPS_LATENCY.labels(name, op, "success") for op in OP_TYPES}
        self.failed = {op: OPS_LATENCY.labels(name, op, "fail") for op in OP_TYPES}
        self.put_bytes = PUT_BYTES.labels(name)
        self.notifications = {t: NOTIFICATIONS.labels(name, label) for t, label in _PULSAR_NOTIFICATION_TYPE.items()}
        self.session_events = {event: SESSION_EVENTS.labels(name, event.value) for event in SessionEvent}
