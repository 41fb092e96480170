"""The two profiles: ``quick`` (``make bench``: every scenario in a few minutes on 2 cores) and
``full`` (longer runs, more points, 10 000 topics). Every figure in a report names its profile."""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    duration_s: float
    """Measured seconds per run."""
    warmup_s: float
    probe_s: float
    """Seconds per disk probe (two probes per mount)."""
    sizes: tuple[int, ...]
    """size: message sizes (bytes), each with batching on and off."""
    rates: tuple[int, ...]
    """latency: fixed publish rates (msg/s), 1 KiB batched messages."""
    topic_counts: tuple[int, ...]
    topics_total_rate: int
    """topics: the total msg/s spread over every topic count's topics."""
    e2e_sizes: tuple[int, ...]
    """e2e-vs-bookie: entry sizes, end-to-end unbatched vs managed-ledger."""
    peer_size: int = KIB
    max_outstanding: int = 1000
    """Per producer (pulsar-perf ``-o``), also the managed-ledger window and the peers' window."""
    window_bytes_max: int = 16 * 1024 * KIB
    """... but never more than this many payload bytes in flight (the BookKeeper client's
    per-ledger add budget): 1000 × 64 KiB in flight would only add queueing to the latency."""
    interval_s: float = 5.0
    consume_backlog: int = 1_000_000
    """consume: 1 KiB batched messages published before the catch-up read (~1 GB, 16× the
    broker's 64 MB entry cache)."""

    def window(self, size_bytes: int) -> int:
        """Messages in flight for ``size_bytes`` messages: ``min(max_outstanding, window_bytes_max / size)``."""
        return max(1, min(self.max_outstanding, self.window_bytes_max // max(size_bytes, 1)))


PROFILES = {
    "quick": Profile(
        name="quick",
        duration_s=5,
        warmup_s=1,
        probe_s=2,
        sizes=(100, KIB, 16 * KIB, 64 * KIB),
        rates=(1_000, 10_000, 50_000),
        topic_counts=(1, 100, 1_000),
        topics_total_rate=5_000,
        e2e_sizes=(KIB, 64 * KIB),
    ),
    "full": Profile(
        name="full",
        duration_s=15,
        warmup_s=3,
        probe_s=5,
        sizes=(100, 256, KIB, 4 * KIB, 16 * KIB, 64 * KIB),
        rates=(1_000, 5_000, 10_000, 20_000, 50_000),
        topic_counts=(1, 100, 1_000, 10_000),
        topics_total_rate=10_000,
        e2e_sizes=(KIB, 16 * KIB, 64 * KIB),
        interval_s=10.0,
        consume_backlog=2_000_000,
    ),
}
