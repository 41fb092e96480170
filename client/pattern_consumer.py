"""Regex subscriptions: a MultiTopicsConsumer over the topics a pattern matches, rediscovered.

As Pulsar's ``PatternMultiTopicsConsumerImpl``: the pattern names one namespace (its domain,
tenant and namespace are literal; only the local name is a regex), the broker lists that
namespace's topics (GET_TOPICS_OF_NAMESPACE; a partitioned topic comes as its partitions), and
a topic is consumed when the pattern matches its whole name — a partition when the pattern
matches its partitioned topic's name. Every ``pattern_auto_discovery_period`` seconds (60, as
Pulsar) the list is asked again: new matching topics are subscribed, vanished ones closed.

A pattern without a domain or namespace is read as Pulsar's short topic names are:
``my-.*`` is ``persistent://public/default/my-.*``, ``t/ns/my-.*`` is ``persistent://t/ns/my-.*``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from minipulsar.client.multi_topics_consumer import MultiTopicsConsumer, partitioned_topic_of
from minipulsar.errors import MiniPulsarError
from minipulsar.topic_name import DEFAULT_NAMESPACE, DEFAULT_TENANT

log = logging.getLogger(__name__)

DEFAULT_PATTERN_AUTO_DISCOVERY_PERIOD_S = 60  # Pulsar: patternAutoDiscoveryPeriod (1 minute)

_NAME = re.compile(r"[-=:.\w]+")
"""What a tenant or namespace name may hold (Pulsar's NamedEntity); in a pattern they are literal."""

TopicLister = Callable[[str, str], Awaitable[list[str]]]
"""``(namespace "tenant/ns", mode) -> full topic names``: GET_TOPICS_OF_NAMESPACE."""


@dataclass(frozen=True, slots=True)
class TopicsPattern:
    domain: str
    namespace: str
    """``tenant/ns``"""
    regex: re.Pattern
    """Matched against whole topic names (``domain://tenant/ns/local``)."""

    @classmethod
    def parse(cls, pattern: str | re.Pattern) -> TopicsPattern:
        """Raises ValueError for a pattern whose namespace part is missing or not literal."""
        text, flags = (pattern.pattern, pattern.flags) if isinstance(pattern, re.Pattern) else (pattern, 0)
        if not isinstance(text, str) or not text:
            raise ValueError("a topics pattern must be a non-empty string")
        domain, sep, rest = text.partition("://")
        if not sep:
            domain, rest = "persistent", text
        if domain not in ("persistent", "non-persistent"):
            raise ValueError(f"topics pattern {text!r}: the domain must be persistent or non-persistent")
        parts = rest.split("/", 2)
        if len(parts) < 3:
            parts = [DEFAULT_TENANT, DEFAULT_NAMESPACE, rest]
        tenant, ns, local = parts
        if not _NAME.fullmatch(tenant) or not _NAME.fullmatch(ns) or not local:
            raise ValueError(f"topics pattern {text!r}: tenant and namespace must be literal names")
        prefix = re.escape(f"{domain}://{tenant}/{ns}/")
        return cls(domain, f"{tenant}/{ns}", re.compile(prefix + f"(?:{local})", flags))

    @property
    def mode(self) -> str:
        return "PERSISTENT" if self.domain == "persistent" else "NON_PERSISTENT"

    def matching(self, topics: list[str]) -> list[str]:
        """The concrete topics (partitions included) whose (partitioned) topic name matches."""
        return [t for t in topics if self.regex.fullmatch(partitioned_topic_of(t))]


class PatternConsumer(MultiTopicsConsumer):
    CLOSES_WHEN_EVERY_CHILD_ENDS = False

    def __init__(
        self,
        pattern: TopicsPattern,
        subscription_name: str,
        factory,
        lister: TopicLister,
        *,
        pattern_auto_discovery_period: float = DEFAULT_PATTERN_AUTO_DISCOVERY_PERIOD_S,
        **options,
    ) -> None:
        super().__init__(pattern.regex.pattern, subscription_name, factory, **options)
        self._pattern = pattern
        self._lister = lister
        self._period_s = pattern_auto_discovery_period
        self._discovery: asyncio.Task | None = None

    async def start(self) -> None:
        """Subscribe to what matches now and start the periodic rediscovery."""
        await self.rediscover()
        if self._period_s and self._period_s > 0:
            self._discovery = asyncio.get_running_loop().create_task(self._rediscover_periodically())

    async def rediscover(self) -> None:
        """Subscribe to the matching topics not consumed yet; close the consumers of the topics
        that no longer exist (or match)."""
        listed = await self._lister(self._pattern.namespace, self._pattern.mode)
        matching = self._pattern.matching(listed)
        gone = [t for t in self.topics() if t not in set(matching)]
        if gone:
            await self.remove_topics(gone)
        await self.add_topics(matching)

    async def _rediscover_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._period_s)  # a period, not a synchronisation
            try:
                await self.rediscover()
            except MiniPulsarError as error:  # try again next period
                log.warning("%s: topic rediscovery failed: %s", self._pattern.regex.pattern, error)

    async def close(self) -> None:
        self._stop_discovery()
        await super().close()

    async def unsubscribe(self) -> None:
        self._stop_discovery()
        await super().unsubscribe()

    def _stop_discovery(self) -> None:
        if self._discovery is not None:
            self._discovery.cancel()
            self._discovery = None
