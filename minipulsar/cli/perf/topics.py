"""Topic and subscription lists, expanded as pulsar-perf does (``PerformanceTopicListArguments``).

One topic name with ``-t N`` (N > 1) becomes ``name-0 … name-(N-1)`` (on the full name:
``persistent://public/default/name-0``); otherwise the names given are the topics. One
subscription name with ``-ns N`` becomes ``sub-0 … sub-(N-1)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from minipulsar.topic_name import TopicName

SEPARATOR = "-"


def expand_topics(topics: Sequence[str], num_topics: int | None = None) -> list[str]:
    """Full topic names. ``num_topics`` None: as many as given.

    Raises:
        ValueError: no topic, a bad name, or several topics that are not ``num_topics``.
    """
    if not topics:
        raise ValueError("give at least one topic")
    names = [str(TopicName.parse(topic)) for topic in topics]
    if num_topics is None or num_topics == len(names):
        return names
    if num_topics < 1:
        raise ValueError(f"--num-topics must be >= 1, got {num_topics}")
    if len(names) != 1:
        raise ValueError(f"{len(names)} topics given but --num-topics is {num_topics}")
    return [f"{names[0]}{SEPARATOR}{i}" for i in range(num_topics)]


def expand_subscriptions(subscriptions: Sequence[str], num_subscriptions: int | None = None) -> list[str]:
    """Subscription names per topic. ``num_subscriptions`` None: as many as given.

    Raises:
        ValueError: none given, or several that are not ``num_subscriptions``.
    """
    names = [name for name in subscriptions if name]
    if not names:
        raise ValueError("give at least one subscription name")
    if num_subscriptions is None or num_subscriptions == len(names):
        return names
    if num_subscriptions < 1:
        raise ValueError(f"--num-subscriptions must be >= 1, got {num_subscriptions}")
    if len(names) != 1:
        raise ValueError(f"{len(names)} subscriptions given but --num-subscriptions is {num_subscriptions}")
    return [f"{names[0]}{SEPARATOR}{i}" for i in range(num_subscriptions)]
