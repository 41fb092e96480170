"""Programs written against the official Pulsar Python client run against minipulsar with only
their import lines changed.

ASYNC_PROGRAM is written as the official ``pulsar.asyncio`` API reads (pulsar-client 3.x:
``pulsar/asyncio.py``): ``Client(url)``, ``await create_producer(topic, batching_enabled=…)``,
``await producer.send(content, properties=, partition_key=) -> MessageId``, ``await
client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared, initial_position=
pulsar.InitialPosition.Earliest)``, ``await consumer.receive()``, ``await
consumer.acknowledge(msg)``, ``await client.create_reader(topic, pulsar.MessageId.earliest)``,
``await reader.read_next()``, ``await reader.has_message_available()``, ``await
reader.seek(MessageId | publish time)``, ``MessageId.serialize()/deserialize()``, errors as
``pulsar.asyncio.PulsarException``. It sticks to what the official client accepts: message ids
are compared through ``str()`` (its ``Message.message_id()`` and ``send()`` return different
MessageId classes) and ``Reader.seek`` takes a ``pulsar.MessageId`` or an int only.
SYNC_PROGRAM is written against the blocking ``pulsar``
module (``pulsar.Client``, ``consumer.receive(timeout_millis=)`` raising ``pulsar.Timeout``).

Method: one standalone-like cluster (metastore, bookie, broker processes); each program runs as
a subprocess of the project's interpreter from an unrelated directory, its text being
``<imports> + <program>``; only the imports differ from the official client's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture

OFFICIAL_ASYNC_IMPORTS = "import pulsar\nfrom pulsar.asyncio import Client, PulsarException\n"
MINIPULSAR_ASYNC_IMPORTS = "import minipulsar as pulsar\nfrom minipulsar import Client, PulsarException\n"

ASYNC_PROGRAM = """
import asyncio
import sys

SERVICE_URL, TOPIC = sys.argv[1], sys.argv[2]


async def main():
    client = Client(SERVICE_URL)
    consumer = await client.subscribe(TOPIC, "compat-sub", consumer_type=pulsar.ConsumerType.Shared,
                                      initial_position=pulsar.InitialPosition.Earliest)
    producer = await client.create_producer(TOPIC, batching_enabled=True, batching_max_publish_delay_ms=10)

    # Sent together, so that they share batches: message ids then carry batch indexes.
    ids = await asyncio.gather(*(producer.send(("msg-%d" % i).encode(), properties={"i": str(i)},
                                               partition_key="key-%d" % (i % 3)) for i in range(10)))
    await producer.flush()
    assert all(isinstance(i, pulsar.MessageId) for i in ids)
    assert sorted(ids) == ids, "ids grow in send order"
    print("sent", len(ids), "batched", sum(1 for i in ids if i.batch_index() >= 0))

    received = {}
    for _ in range(10):
        msg = await consumer.receive()
        received[msg.data().decode()] = msg
        await consumer.acknowledge(msg)
    assert sorted(received) == sorted("msg-%d" % i for i in range(10))
    sample = received["msg-4"]
    assert sample.properties() == {"i": "4"} and sample.partition_key() == "key-1"
    assert str(sample.message_id()) == str(ids[4]) and sample.topic_name().endswith(TOPIC.rsplit("/", 1)[1])
    assert sample.publish_timestamp() > 0
    print("consumed", len(received))

    try:
        await client.subscribe(TOPIC, "compat-sub", consumer_type=pulsar.ConsumerType.Exclusive)
        raise AssertionError("a second consumer type on the same subscription must be refused")
    except PulsarException as error:
        print("refused:", type(error).__name__)

    reader = await client.create_reader(TOPIC, pulsar.MessageId.earliest)
    read = [(await reader.read_next()).data()]
    while await reader.has_message_available():
        read.append((await reader.read_next()).data())
    assert read == [("msg-%d" % i).encode() for i in range(10)], read
    print("read", len(read))

    after_4 = await client.create_reader(TOPIC, ids[4])
    assert (await after_4.read_next()).data() == b"msg-5"
    stored = ids[4].serialize()
    at_4 = await client.create_reader(TOPIC, pulsar.MessageId.deserialize(stored), start_message_id_inclusive=True)
    assert (await at_4.read_next()).data() == b"msg-4"
    await reader.seek(ids[7])
    assert (await reader.read_next()).data() == b"msg-8"
    await reader.seek(0)  # a publish time: the first message at or after it
    assert (await reader.read_next()).data() == b"msg-0"
    latest = await client.create_reader(TOPIC, pulsar.MessageId.latest)
    assert not await latest.has_message_available()
    print("reader positions ok")

    for closable in (reader, after_4, at_4, latest, producer, consumer):
        await closable.close()
    await client.close()
    print("OK")


asyncio.run(main())
"""

OFFICIAL_SYNC_IMPORTS = "import pulsar\n"
MINIPULSAR_SYNC_IMPORTS = "import minipulsar.sync as pulsar\n"

SYNC_PROGRAM = """
import sys

SERVICE_URL, TOPIC = sys.argv[1], sys.argv[2]

client = pulsar.Client(SERVICE_URL)
consumer = client.subscribe(TOPIC, "sync-sub", consumer_type=pulsar.ConsumerType.Exclusive,
                            initial_position=pulsar.InitialPosition.Earliest)
producer = client.create_producer(TOPIC)
for i in range(5):
    message_id = producer.send(("hello-%d" % i).encode())
print("sent", message_id)
for i in range(5):
    msg = consumer.receive(timeout_millis=10000)
    assert msg.data() == ("hello-%d" % i).encode()
    consumer.acknowledge(msg)
try:
    consumer.receive(timeout_millis=200)
    raise AssertionError("nothing is left to receive")
except pulsar.Timeout:
    print("timeout as expected")
reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
assert reader.read_next(timeout_millis=10000).data() == b"hello-0"
assert reader.has_message_available()
client.close()
print("OK")
"""


cluster = cluster_fixture(per_module=True)


def run_program(tmp_path: Path, source: str, cluster: ProcessCluster, topic: str) -> subprocess.CompletedProcess:
    script = tmp_path / "program.py"
    script.write_text(source)
    return subprocess.run(
        [sys.executable, str(script), cluster.service_url, topic],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=90,
    )


def ported(official_imports: str, minipulsar_imports: str, program: str) -> str:
    """The program as ported: the official client's import lines swapped, nothing else."""
    assert "minipulsar" not in program
    original = official_imports + program
    port = original.replace(official_imports, minipulsar_imports, 1)
    assert port[len(minipulsar_imports) :] == original[len(official_imports) :]
    return port


def test_an_official_pulsar_asyncio_program_runs_with_only_its_imports_changed(
    tmp_path: Path, cluster: ProcessCluster
) -> None:
    source = ported(OFFICIAL_ASYNC_IMPORTS, MINIPULSAR_ASYNC_IMPORTS, ASYNC_PROGRAM)
    result = run_program(tmp_path, source, cluster, "persistent://public/default/compat-async")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("sent 10") and "consumed 10" in lines and "read 10" in lines
    assert lines[-1] == "OK"
    batched = int(lines[0].split()[-1])
    assert batched > 0, "concurrent sends with batching on share batches"


def test_an_official_sync_pulsar_program_runs_on_the_sync_facade(tmp_path: Path, cluster: ProcessCluster) -> None:
    source = ported(OFFICIAL_SYNC_IMPORTS, MINIPULSAR_SYNC_IMPORTS, SYNC_PROGRAM)
    result = run_program(tmp_path, source, cluster, "persistent://public/default/compat-sync")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "timeout as expected" in result.stdout and result.stdout.splitlines()[-1] == "OK"
