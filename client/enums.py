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
