"""``minipulsar produce`` / ``minipulsar consume``: pulsar-client's verbs, with its flags.

produce TOPIC: ``-m`` messages (repeatable, each split on ``-s``, default ","), ``-f`` files
(each file's bytes are one message), ``-n`` times, ``-r`` messages/s (0: as fast as it goes),
``-k`` key, ``-p`` properties (``k=v``, repeatable or comma-separated), ``-db`` no batching.
Ends with "N messages successfully produced".

consume TOPIC: ``-s`` subscription (required), ``-t`` type, ``-p`` initial position,
``-m`` subscription mode (Durable | NonDurable), ``-n`` messages (0: forever), ``-r``
messages/s, ``--hex`` (hex dump of the content), ``--hide-content``, ``--regex`` (TOPIC is a
pattern), ``-q`` receiver queue size. Prints each message as pulsar-client does
(``----- got message -----`` then ``key:[…], properties:[k=v, …], content:…``), acknowledges
it, and ends with "N messages successfully consumed".

Deviations from pulsar-client: ``-p`` of consume defaults to Earliest (a new subscription sees
what was produced before it, which is what a first ``produce`` / ``consume`` try expects), and
``--timeout`` gives up after that many seconds without a message.

Errors (a bad topic name, an unreachable broker, a refused subscription …) end the command
with exit code 1 and one line on stderr, ``error: <what>: <why>``; no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import sys
import time
from pathlib import Path

from minipulsar.errors import MiniPulsarError
from minipulsar.net.loop import run
from minipulsar.topic_name import TopicName

DEFAULT_SERVICE_URL = "pulsar://localhost:6650"
SUBSCRIPTION_TYPES = {
    "Exclusive": "Exclusive",
    "Shared": "Shared",
    "Failover": "Failover",
    "Key_Shared": "KeyShared",
    "KeyShared": "KeyShared",
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    produce = subparsers.add_parser(
        "produce", help="send messages to a topic", description="Send messages (as pulsar-client produce)."
    )
    produce.add_argument("topic")
    produce.add_argument(
        "-m",
        "--messages",
        action="append",
        default=[],
        metavar="TEXT",
        help="messages to send, split on the separator (repeatable)",
    )
    produce.add_argument(
        "-f",
        "--files",
        action="append",
        default=[],
        metavar="FILE",
        help="a file whose bytes are one message (repeatable)",
    )
    produce.add_argument("-s", "--separator", default=",", help="separator of -m messages (default ,)")
    produce.add_argument(
        "-n",
        "--num-produce",
        type=_non_negative_int,
        default=1,
        metavar="N",
        help="how many times to send the messages (default 1)",
    )
    produce.add_argument(
        "-r",
        "--rate",
        type=_non_negative_float,
        default=0.0,
        metavar="MSG/S",
        help="messages per second, 0 = as fast as possible (default 0)",
    )
    produce.add_argument("-k", "--key", default=None, help="the message key (partition key)")
    produce.add_argument(
        "-p",
        "--properties",
        action="append",
        default=[],
        metavar="K=V[,K=V]",
        help="message properties (repeatable, or comma-separated)",
    )
    produce.add_argument("-db", "--disable-batching", action="store_true", help="send without batching")
    _common(produce)
    produce.set_defaults(func=run_produce)

    consume = subparsers.add_parser(
        "consume",
        help="receive messages from a subscription",
        description="Receive and acknowledge messages (as pulsar-client consume).",
    )
    consume.add_argument("topic")
    consume.add_argument("-s", "--subscription-name", required=True, metavar="SUB")
    consume.add_argument("-t", "--subscription-type", default="Exclusive", choices=sorted(SUBSCRIPTION_TYPES))
    consume.add_argument(
        "-p",
        "--subscription-position",
        default="Earliest",
        choices=["Latest", "Earliest"],
        help="where a new subscription starts (default Earliest)",
    )
    consume.add_argument("-m", "--subscription-mode", default="Durable", choices=["Durable", "NonDurable"])
    consume.add_argument(
        "-n",
        "--num-messages",
        type=_non_negative_int,
        default=1,
        metavar="N",
        help="messages to receive, 0 = forever (default 1)",
    )
    consume.add_argument(
        "-r",
        "--rate",
        type=_non_negative_float,
        default=0.0,
        metavar="MSG/S",
        help="messages per second, 0 = as fast as they come (default 0)",
    )
    consume.add_argument("--hex", action="store_true", help="print the content as a hex dump")
    consume.add_argument("--hide-content", action="store_true", help="do not print the content")
    consume.add_argument("--regex", action="store_true", help="TOPIC is a regex of topic names")
    consume.add_argument(
        "-q", "--queue-size", type=int, default=1000, metavar="N", help="receiver queue size (default 1000)"
    )
    consume.add_argument(
        "--timeout",
        type=_non_negative_float,
        default=0,
        metavar="SECONDS",
        help="give up after this long without a message (default: wait forever)",
    )
    _common(consume)
    consume.set_defaults(func=run_consume)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--service-url",
        "--url",
        default=DEFAULT_SERVICE_URL,
        help=f"broker service URL (default {DEFAULT_SERVICE_URL})",
    )
    parser.add_argument(
        "--operation-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long lookups and other operations may take (default 30)",
    )


# -- produce ------------------------------------------------------------------------------------


def run_produce(args: argparse.Namespace) -> int:
    try:
        topic = _topic(args.topic)
        bodies = message_bodies(args.messages, args.separator, args.files)
        properties = parse_properties(args.properties)
    except UsageError as error:
        return _fail(str(error))

    async def produce() -> int:
        from minipulsar import Client

        async with Client(args.service_url, operation_timeout_seconds=args.operation_timeout) as client:
            producer = await client.create_producer(topic, **_batching(args))
            pacer = Pacer(args.rate)
            sent = 0
            for _ in range(args.num_produce):
                for body in bodies:
                    await pacer.wait()
                    await producer.send(body, properties=properties or None, partition_key=args.key)
                    sent += 1
            print(f"{sent} messages successfully produced", flush=True)
        return 0

    return _run(produce)


def _batching(args: argparse.Namespace) -> dict:
    """``batching_enabled=False`` for ``-db``, when the client's create_producer knows it."""
    if not args.disable_batching:
        return {}
    import inspect

    from minipulsar import Client

    return (
        {"batching_enabled": False}
        if "batching_enabled" in inspect.signature(Client.create_producer).parameters
        else {}
    )


class UsageError(Exception):
    """Bad command-line input, reported as one line."""


def message_bodies(messages: list[str], separator: str, files: list[str]) -> list[bytes]:
    """The bodies to send: each ``-m`` split on ``separator``, then each ``-f`` file's bytes."""
    if not messages and not files:
        raise UsageError("give messages to send with -m TEXT or -f FILE")
    bodies = [part.encode() for text in messages for part in (text.split(separator) if separator else [text])]
    for name in files:
        try:
            bodies.append(Path(name).read_bytes())
        except OSError as error:
            raise UsageError(f"cannot read {name}: {error.strerror or error}") from None
    return bodies


def parse_properties(items: list[str]) -> dict[str, str]:
    """``["a=1,b=2", "c=3"]`` → ``{"a": "1", "b": "2", "c": "3"}``."""
    properties: dict[str, str] = {}
    for item in items:
        for pair in item.split(","):
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise UsageError(f"invalid property {pair!r}: expected key=value")
            properties[key] = value
    return properties


# -- consume ------------------------------------------------------------------------------------


def run_consume(args: argparse.Namespace) -> int:
    try:
        topic = re.compile(args.topic) if args.regex else _topic(args.topic)
    except (UsageError, re.error) as error:
        return _fail(f"invalid topic pattern {args.topic!r}: {error}" if args.regex else str(error))

    async def consume() -> int:
        from minipulsar import Client, ConsumerType, InitialPosition

        async with Client(args.service_url, operation_timeout_seconds=args.operation_timeout) as client:
            settings = {
                "consumer_type": ConsumerType[SUBSCRIPTION_TYPES[args.subscription_type]],
                "initial_position": InitialPosition[args.subscription_position],
                "receiver_queue_size": args.queue_size,
            }
            if args.subscription_mode == "NonDurable":  # in memory only, gone with this consumer
                settings["durable"] = False
            consumer = await client.subscribe(topic, args.subscription_name, **settings)
            pacer = Pacer(args.rate)
            received = 0
            while args.num_messages == 0 or received < args.num_messages:
                await pacer.wait()
                message = await consumer.receive(int(args.timeout * 1000) if args.timeout else None)
                print(format_message(message, hex_dump=args.hex, hide_content=args.hide_content), flush=True)
                await consumer.acknowledge(message)
                received += 1
            print(f"{received} messages successfully consumed", flush=True)
        return 0

    return _run(consume)


def format_message(message, *, hex_dump: bool = False, hide_content: bool = False) -> str:
    """pulsar-client's rendering of a received message."""
    properties = ", ".join(f"{k}={v}" for k, v in message.properties().items())
    head = f"----- got message -----\nkey:[{message.partition_key() or 'null'}], properties:[{properties}]"
    if hide_content:
        return head
    data = message.data()
    content = "\n" + hexdump(data) if hex_dump else data.decode(errors="replace")
    return f"{head}, content:{content}"


def hexdump(data: bytes) -> str:
    """16 bytes a line: offset, hex bytes, printable ASCII (as ``hexdump -C``)."""
    lines = []
    for offset in range(0, len(data), 16):
        chunk = data[offset : offset + 16]
        hex_part = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{offset:08x}  {hex_part:<47}  |{text}|")
    return "\n".join(lines)


# -- shared -------------------------------------------------------------------------------------


class Pacer:
    """At most ``rate`` calls of :meth:`wait` per second (0: no limit), evenly spaced."""

    def __init__(self, rate: float) -> None:
        self._interval_s = 1 / rate if rate > 0 else 0.0
        self._next = time.monotonic()

    async def wait(self) -> None:
        if not self._interval_s:
            return
        now = time.monotonic()
        if self._next > now:
            await asyncio.sleep(self._next - now)  # pacing to the rate, not synchronisation
        self._next = max(self._next, now) + self._interval_s


def _topic(name: str) -> str:
    try:
        return str(TopicName.parse(name))
    except ValueError as error:
        raise UsageError(str(error)) from None


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def _run(main) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("minipulsar.client").setLevel(logging.ERROR)  # retries are reported once, by the final error
    try:
        return run(main())
    except UsageError as error:
        return _fail(str(error))
    except MiniPulsarError as error:
        return _fail(f"{type(error).__name__}: {_one_line(error)}")
    except (OSError, TimeoutError, ValueError) as error:
        return _fail(f"{type(error).__name__}: {_one_line(error)}")
    except KeyboardInterrupt:
        return 130


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
