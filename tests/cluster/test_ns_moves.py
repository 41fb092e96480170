"""Bundles move while a producer and a consumer keep running.

Goal: on 3 real brokers, unloading a bundle, splitting it (with unload), unloading the
namespace, stopping the owning broker cleanly and killing it (SIGKILL) each move the topic's
bundle, and the clients carry on through lookup and reconnection: every message the producer
got a receipt for is received, and no message is delivered again after its acknowledgement
completed (the consumer acknowledges with receipts).

Method: a client whose service URL names the three brokers; a producer sending continuously
(at most ``AHEAD`` messages ahead of the consumer) and a consumer acknowledging each message;
each move happens once the traffic has made progress since the previous one, and the test ends
by draining every receipted message. Message bodies number the messages; redelivery after an
ack is detected by message id. Batching is off, so every completed acknowledgement was stored
by the broker (a batch is acknowledged on the broker only once all its messages are).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from minipulsar import Client, InitialPosition, Timeout
from minipulsar.cli.admin import AdminClient
from minipulsar.errors import MiniPulsarError
from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture
from tests.support.process import ServerProcess, wait_for

TOPIC = "persistent://public/default/moving"
AHEAD = 200
"""How far the producer may run ahead of the consumer's acknowledgements (keeps the drain short)."""
PROGRESS = 150
"""Messages acknowledged after each move before the next one (proof the clients carried on)."""
MOVE_TIMEOUT_S = 30.0


class Traffic:
    def __init__(self, client: Client) -> None:
        self._client = client
        self.receipted: dict[int, object] = {}
        """Message number → the message id its receipt carried."""
        self.moves = 0
        self.moved_at: list[int] = []
        """How many messages were receipted when each move started."""
        self.received: dict[int, int] = {}
        self._acked_numbers: set[int] = set()
        self.acked_ids: set = set()
        self.delivered_after_ack: list = []
        self.send_errors: list[str] = []
        self._stopping = False
        self._produced = False
        """Every send has its answer: the receipted set is final."""
        self._progress = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        self.consumer = await self._client.subscribe(TOPIC, "sub", initial_position=InitialPosition.Earliest)
        # one message per entry: an acknowledgement then reaches the broker for every message (with
        # batches, the client acks an entry only once all its messages are acked — Pulsar's default)
        self.producer = await self._client.create_producer(TOPIC, batching_enabled=False)
        self._tasks = [asyncio.create_task(self._produce()), asyncio.create_task(self._consume())]

    async def _produce(self) -> None:
        sends: set[asyncio.Task] = set()
        n = 0
        while not self._stopping:
            while n - self.acked >= AHEAD and not self._stopping:
                self._progress.clear()
                await self._progress.wait()
            task = asyncio.create_task(self._send(n))
            sends.add(task)
            task.add_done_callback(sends.discard)
            n += 1
            if len(sends) >= 32:
                await asyncio.wait(sends, return_when=asyncio.FIRST_COMPLETED)
        await asyncio.gather(*sends)

    async def _send(self, n: int) -> None:
        try:
            message_id = await self.producer.send(f"m-{n}".encode())
        except MiniPulsarError as error:  # counted: a failed send is not receipted, so not owed to the consumer
            self.send_errors.append(repr(error))
        else:
            self.receipted[n] = message_id

    async def _consume(self) -> None:
        while True:
            try:
                message = await self.consumer.receive(timeout_millis=500)
            except Timeout:
                if self._produced and self.receipted.keys() <= self.received.keys():
                    return
                continue
            message_id = message.message_id()
            if message_id in self.acked_ids:
                self.delivered_after_ack.append(message_id)
            n = int(message.data().decode()[2:])
            self.received[n] = self.received.get(n, 0) + 1
            try:
                await self.consumer.acknowledge(message)
            except MiniPulsarError:  # the consumer was moving: not acknowledged, so it may come again
                continue
            self.acked_ids.add(message_id)
            self._acked_numbers.add(n)
            self._progress.set()

    @property
    def acked(self) -> int:
        """Distinct messages acknowledged (a redelivered one counts once): progress means new messages."""
        return len(self._acked_numbers)

    async def made_progress(self, messages: int = PROGRESS) -> None:
        target = self.acked + messages
        await wait_for(
            lambda: self.acked >= target,
            MOVE_TIMEOUT_S,
            message=f"stuck at {self.acked} acknowledged (wanted {target}); send errors: {self.send_errors[-3:]}",
        )

    async def finish(self) -> None:
        self._stopping = True
        self._progress.set()
        producing, consuming = self._tasks
        await asyncio.wait_for(producing, MOVE_TIMEOUT_S)
        self._produced = True
        await asyncio.wait_for(consuming, MOVE_TIMEOUT_S)

    def check(self) -> None:
        lost = sorted(self.receipted.keys() - self.received.keys())
        assert not lost, (
            f"{len(lost)} receipted messages never received, e.g. "
            f"{[(n, self.receipted[n]) for n in lost[:5]]}; moves at {self.moved_at}; "
            f"received up to {max(self.received, default=None)}"
        )
        assert not self.delivered_after_ack, f"delivered again after their ack: {self.delivered_after_ack[:10]}"
        assert len(self.receipted) > 3 * PROGRESS


cluster = cluster_fixture(brokers=3)


def service_url(cluster: ProcessCluster) -> str:
    return "pulsar://" + ",".join(b.address for b in cluster.brokers)


def admin_http(method: str, url: str) -> bytes:
    """``method url`` following redirects (a PUT's 307 to a bundle's owner too), as the admin CLI does."""
    parts = urlsplit(url)
    answer = AdminClient(f"http://{parts.netloc}", 60).request(
        method, parts.path + (f"?{parts.query}" if parts.query else "")
    )
    return json.dumps(answer).encode()


async def owner(cluster: ProcessCluster, via: ServerProcess | None = None) -> ServerProcess:
    """The broker serving TOPIC, by the HTTP lookup (307s followed)."""
    via = via or next(b for b in cluster.brokers if b.running)
    url = f"http://{via.host}:{via.http_port}/lookup/v2/topic/persistent/public/default/moving"
    broker_url = json.loads(await asyncio.to_thread(admin_http, "GET", url))["brokerUrl"]
    return next(b for b in cluster.brokers if f"pulsar://{b.address}" == broker_url)


async def bundle_of_topic(broker: ServerProcess) -> str:
    owned = json.loads(
        await asyncio.to_thread(
            admin_http,
            "GET",
            f"http://{broker.host}:{broker.http_port}/admin/v2/brokers/standalone/"
            f"{broker.host}:{broker.http_port}/ownedNamespaces",
        )
    )
    from minipulsar.broker.namespace.bundles import NamespaceBundle, topic_hash  # the broker's own hash

    return next(
        name.rsplit("/", 1)[1] for name in owned if NamespaceBundle.parse(name).range.contains(topic_hash(TOPIC))
    )


async def run_moves(cluster: ProcessCluster, moves: list[Callable[[], Awaitable[None]]]) -> Traffic:
    async with Client(service_url(cluster), operation_timeout_seconds=30) as client:
        traffic = Traffic(client)
        await traffic.start()
        try:
            await traffic.made_progress()
            for move in moves:
                traffic.moved_at.append(len(traffic.receipted))
                await move()
                await traffic.made_progress()
        finally:
            await traffic.finish()
    return traffic


async def test_unload_and_split_move_the_bundle_while_clients_keep_running(cluster: ProcessCluster) -> None:
    moved_from: list[ServerProcess] = []

    async def unload_bundle() -> None:
        current = await owner(cluster)
        moved_from.append(current)
        bundle = await bundle_of_topic(current)
        other = next(b for b in cluster.brokers if b is not current)  # 307 to the owner
        await asyncio.to_thread(
            admin_http,
            "PUT",
            f"http://{other.host}:{other.http_port}/admin/v2/namespaces/public/default/{bundle}/unload",
        )

    async def split_with_unload() -> None:
        current = await owner(cluster)
        bundle = await bundle_of_topic(current)
        await asyncio.to_thread(
            admin_http,
            "PUT",
            f"http://{current.host}:{current.http_port}/admin/v2/namespaces/public/default/{bundle}/split?unload=true",
        )

    async def unload_namespace() -> None:
        await asyncio.to_thread(
            admin_http,
            "PUT",
            f"http://{cluster.broker.host}:{cluster.broker.http_port}/admin/v2/namespaces/public/default/unload",
        )

    traffic = await run_moves(cluster, [unload_bundle, split_with_unload, unload_namespace])
    traffic.check()
    bundles = json.loads(
        await asyncio.to_thread(
            admin_http,
            "GET",
            f"http://{cluster.broker.host}:{cluster.broker.http_port}/admin/v2/namespaces/public/default/bundles",
        )
    )
    assert bundles["numBundles"] == 5  # 4 + the split


async def test_owner_stopping_and_dying_moves_the_bundle_and_clients_continue(cluster: ProcessCluster) -> None:
    stopped: list[ServerProcess] = []

    async def stop_owner_cleanly() -> None:  # unloads its bundles first: clients move at once
        current = await owner(cluster)
        stopped.append(current)
        await cluster.stop_broker(cluster.brokers.index(current))

    async def kill_owner() -> None:  # its keys go with its session (2 s in tests), then lookups re-place
        current = await owner(cluster)
        stopped.append(current)
        await cluster.kill_broker(cluster.brokers.index(current))

    traffic = await run_moves(cluster, [stop_owner_cleanly, kill_owner])
    traffic.check()
    survivor = await owner(cluster)
    assert survivor.running and survivor not in stopped
