"""Binary lookup: which broker serves a topic (reference §2.5).

Ask the service URL; ``connect`` names the owner; ``redirect`` means ask the named broker
(carrying its ``authoritative`` flag); give up after ``MAX_LOOKUP_REDIRECTS``.
"""

from __future__ import annotations

from minipulsar.net import parse_address
from minipulsar.protocol import commands as cmd

from client.connection import ConnectionPool
from client.exceptions import LookupError

MAX_LOOKUP_REDIRECTS = 20  # Pulsar client: maxLookupRedirects


class LookupService:
    def __init__(self, pool: ConnectionPool, service_url: str) -> None:
        self._pool = pool
        self.service_address = parse_address(service_url, 6650)

    async def find_broker(self, topic: str) -> tuple[str, int]:
        address, authoritative = self.service_address, False
        for _ in range(MAX_LOOKUP_REDIRECTS + 1):
            connection = await self._pool.get(*address)
            response: cmd.LookupResponse = await connection.request(
                cmd.Lookup, topic=topic, authoritative=authoritative)
            if response.kind == "connect":
                return parse_address(response.broker_url, 6650)
            if response.kind == "redirect":
                address, authoritative = parse_address(response.broker_url, 6650), response.authoritative
                continue
            raise LookupError(f"lookup of {topic} failed: {response.message}")
        raise LookupError(f"lookup of {topic} redirected more than {MAX_LOOKUP_REDIRECTS} times")

    async def partition_count(self, topic: str) -> int:
        connection = await self._pool.get(*self.service_address)
        response: cmd.PartitionedMetadataResponse = await connection.request(cmd.PartitionedMetadata, topic=topic)
        return response.partitions
