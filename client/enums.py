"""Enums with the official ``pulsar`` client's member names."""

import enum


class ConsumerType(enum.Enum):
    Exclusive = "Exclusive"
    Shared = "Shared"
    Failover = "Failover"
    KeyShared = "Key_Shared"


class InitialPosition(enum.Enum):
    Latest = "Latest"
    Earliest = "Earliest"


class CompressionType(enum.Enum):
    """How a producer compresses its batches (``pulsar.CompressionType``). SNAPPY is named
    for compatibility but refused: minipulsar does not ship its library."""

    NONE = "NONE"
    LZ4 = "LZ4"
    ZLib = "ZLIB"
    ZSTD = "ZSTD"
    SNAPPY = "SNAPPY"


class BatchingType(enum.Enum):
    """``pulsar.BatchingType``: Default batches messages in arrival order; KeyBased keeps one
    key per batch (needed for Key_Shared subscriptions to route whole batches by key)."""

    Default = "Default"
    KeyBased = "KeyBased"
