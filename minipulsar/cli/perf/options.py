"""What a perf run takes: one dataclass per mode, with pulsar-perf's defaults.

Kept apart from the runners (and free of client imports) so that ``minipulsar --help`` and
the argparse layer stay cheap. Each class checks its values on construction (ValueError).

Deviations from pulsar-perf, on purpose: ``rate_per_s`` 0 means "as fast as possible"
(pulsar-perf's RateLimiter refuses 0); ``max_outstanding`` defaults to 1000 for produce (the
client's ``max_pending_messages``; pulsar-perf's v4 default was 1000 too); managed-ledger
takes ``warmup_s`` (default 0, as pulsar-perf, which has none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minipulsar.cli.perf.topics import expand_subscriptions, expand_topics

DEFAULT_SERVICE_URL = "pulsar://localhost:6650"
DEFAULT_STATS_INTERVAL_S = 10.0
"""pulsar-perf prints its periodic line every 10 s."""
DEFAULT_BATCH_MAX_BYTES = 4 * 1024 * 1024
COMPRESSIONS = ("NONE", "LZ4", "ZLIB", "ZSTD")
SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")
SUBSCRIPTION_POSITIONS = ("Latest", "Earliest")
CLIENTS = ("minipulsar", "official")
"""Which client ``perf produce`` drives: minipulsar's own, or Pulsar's (``pulsar-client``,
speaking Pulsar's binary protocol to the same port)."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass(kw_only=True)
class ProduceOptions:
    topics: list[str]
    service_url: str = DEFAULT_SERVICE_URL
    rate_per_s: float = 100.0
    """Messages per second across all topics and producers; 0: as fast as possible."""
    size_bytes: int = 1024
    num_topics: int | None = None
    """With one topic name: ``name-0 … name-(N-1)``; None: the topics as given."""
    num_producers: int = 1
    """Producers per topic."""
    num_messages: int = 0
    """Messages in total, then stop; 0: no limit."""
    duration_s: float = 0.0
    """Stop sending after this long; 0: no limit."""
    warmup_s: float = 1.0
    """Publish latencies of the first seconds are not recorded (the messages are counted)."""
    batching: bool = True
    batch_time_window_ms: float = 1.0
    batch_max_messages: int = 1000
    batch_max_bytes: int = DEFAULT_BATCH_MAX_BYTES
    max_outstanding: int = 1000
    """Messages sent and not yet acknowledged, per producer (its ``max_pending_messages``;
    a full producer blocks the sender)."""
    compression: str = "NONE"
    send_timeout_s: float = 0.0
    """0 (pulsar-perf's default): a message waits for its receipt however long it takes."""
    stats_interval_s: float = DEFAULT_STATS_INTERVAL_S
    operation_timeout_s: float = 30.0
    """Lookups and producer creation give up after this long (an unreachable cluster)."""
    timeline_s: float = 0.0
    """> 0: keep a latency timeline in buckets of this many seconds (the result's ``timeline``)."""
    client: str = "minipulsar"
    """One of :data:`CLIENTS`."""

    def __post_init__(self) -> None:
        self.topics = list(self.topics)
        expand_topics(self.topics, self.num_topics)  # bad names fail here, before any connection
        _check(self.client in CLIENTS, f"client must be one of {', '.join(CLIENTS)}")
        self.compression = self.compression.upper()
        _check(self.compression in COMPRESSIONS, f"compression must be one of {', '.join(COMPRESSIONS)}")
        _check(self.rate_per_s >= 0, f"rate must be >= 0, got {self.rate_per_s}")
        _check(self.size_bytes >= 0, f"size must be >= 0, got {self.size_bytes}")
        _check(self.num_producers >= 1, f"num_producers must be >= 1, got {self.num_producers}")
        _check(
            self.num_messages >= 0 and self.duration_s >= 0 and self.warmup_s >= 0,
            "num_messages, duration and warm-up time must be >= 0",
        )
        _check(self.max_outstanding >= 0, f"max_outstanding must be >= 0, got {self.max_outstanding}")
        _check(self.stats_interval_s > 0, f"the stats interval must be > 0 s, got {self.stats_interval_s}")
        _check(self.send_timeout_s >= 0 and self.operation_timeout_s > 0, "timeouts must be >= 0")

    @property
    def batching_enabled(self) -> bool:
        """pulsar-perf: off with ``-db``, or with neither a time window nor a message limit."""
        return self.batching and not (self.batch_time_window_ms <= 0 and self.batch_max_messages <= 0)


@dataclass(kw_only=True)
class ConsumeOptions:
    topics: list[str]
    service_url: str = DEFAULT_SERVICE_URL
    num_topics: int | None = None
    num_consumers: int = 1
    """Consumers per subscription (only one on an Exclusive subscription)."""
    subscriptions: list[str] = field(default_factory=lambda: ["sub"])
    num_subscriptions: int | None = None
    """With one subscription name: ``sub-0 … sub-(N-1)`` on every topic; None: as given."""
    subscription_type: str = "Exclusive"
    subscription_position: str = "Latest"
    rate_per_s: float = 0.0
    """A slow consumer: at most this many messages per second in all; 0: as they come."""
    receiver_queue_size: int = 1000
    acks_delay_ms: float = 100.0
    """Acknowledgements go out in groups this often (fire-and-forget, as Pulsar's)."""
    num_messages: int = 0
    duration_s: float = 0.0
    stats_interval_s: float = DEFAULT_STATS_INTERVAL_S
    operation_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        self.topics, self.subscriptions = list(self.topics), list(self.subscriptions)
        expand_topics(self.topics, self.num_topics)  # bad names fail here, before any connection
        expand_subscriptions(self.subscriptions, self.num_subscriptions)
        types = {t.lower().replace("_", ""): t for t in SUBSCRIPTION_TYPES}
        self.subscription_type = types.get(self.subscription_type.lower().replace("_", ""), self.subscription_type)
        _check(
            self.subscription_type in SUBSCRIPTION_TYPES,
            f"subscription type must be one of {', '.join(SUBSCRIPTION_TYPES)}",
        )
        self.subscription_position = self.subscription_position.capitalize()
        _check(self.subscription_position in SUBSCRIPTION_POSITIONS, "subscription position must be Latest or Earliest")
        _check(self.num_consumers >= 1, f"num_consumers must be >= 1, got {self.num_consumers}")
        _check(
            not (self.subscription_type == "Exclusive" and self.num_consumers > 1),
            "Only one consumer is allowed when subscriptionType is Exclusive",
        )
        _check(
            self.rate_per_s >= 0 and self.receiver_queue_size >= 0 and self.acks_delay_ms >= 0,
            "rate, receiver queue size and acks delay must be >= 0",
        )
        _check(self.num_messages >= 0 and self.duration_s >= 0, "num_messages and duration must be >= 0")
        _check(self.stats_interval_s > 0, f"the stats interval must be > 0 s, got {self.stats_interval_s}")
        _check(self.operation_timeout_s > 0, "the operation timeout must be > 0")


@dataclass(kw_only=True)
class ManagedLedgerOptions:
    metadata_url: str
    """``metastore://host:port``: where the bookies are registered (no broker is involved)."""
    rate_per_s: float = 100.0
    """Entries per second across all ledgers; 0: as fast as possible."""
    size_bytes: int = 1024
    num_ledgers: int = 1
    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1
    max_outstanding: int = 1000
    """Adds in flight across all ledgers; 0: unbounded."""
    num_messages: int = 0
    duration_s: float = 0.0
    warmup_s: float = 0.0
    stats_interval_s: float = DEFAULT_STATS_INTERVAL_S

    def __post_init__(self) -> None:
        _check(bool(self.metadata_url), "the metadata store URL is required (--metadata-store)")
        _check(
            self.ensemble_size >= self.write_quorum >= self.ack_quorum >= 1,
            f"quorums must satisfy ensemble >= write quorum >= ack quorum >= 1, got "
            f"{self.ensemble_size}/{self.write_quorum}/{self.ack_quorum}",
        )
        _check(self.num_ledgers >= 1, f"num_ledgers must be >= 1, got {self.num_ledgers}")
        _check(
            self.rate_per_s >= 0 and self.size_bytes >= 0 and self.max_outstanding >= 0,
            "rate, size and max outstanding must be >= 0",
        )
        _check(
            self.num_messages >= 0 and self.duration_s >= 0 and self.warmup_s >= 0,
            "num_messages, duration and warm-up time must be >= 0",
        )
        _check(self.stats_interval_s > 0, f"the stats interval must be > 0 s, got {self.stats_interval_s}")
