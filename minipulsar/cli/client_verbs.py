"""``minipulsar produce`` / ``minipulsar consume``: pulsar-client's verbs."""

from __future__ import annotations

import argparse
import logging
import sys

from minipulsar.errors import MiniPulsarError
from minipulsar.net.loop import run

DEFAULT_SERVICE_URL = "pulsar://localhost:6650"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    produce = subparsers.add_parser("produce", help="send messages to a topic",
                                    description="Send messages (as pulsar-client produce).")
    produce.add_argument("topic")
    produce.add_argument("-m", "--messages", action="append", required=True, metavar="TEXT",
                         help="message body (repeatable; each is sent -n times)")
    produce.add_argument("-n", "--num-produce", type=int, default=1, metavar="N",
                         help="how many times to send the messages (default 1)")
    _common(produce)
    produce.set_defaults(func=run_produce)

    consume = subparsers.add_parser("consume", help="receive messages from a subscription",
                                    description="Receive and acknowledge messages (as pulsar-client consume).")
    consume.add_argument("topic")
    consume.add_argument("-s", "--subscription-name", required=True, metavar="SUB")
    consume.add_argument("-n", "--num-messages", type=int, default=1, metavar="N",
                         help="messages to receive, 0 = forever (default 1)")
    consume.add_argument("-t", "--subscription-type", default="Exclusive",
                         choices=["Exclusive", "Shared", "Failover"])
    consume.add_argument("-p", "--subscription-position", default="Earliest", choices=["Latest", "Earliest"],
                         help="where a new subscription starts (default Earliest)")
    consume.add_argument("--timeout", type=float, default=0, metavar="SECONDS",
                         help="give up after this long without a message (default: wait forever)")
    _common(consume)
    consume.set_defaults(func=run_consume)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--service-url", "--url", default=DEFAULT_SERVICE_URL,
                        help=f"broker service URL (default {DEFAULT_SERVICE_URL})")


def run_produce(args: argparse.Namespace) -> int:
    from client import Client

    async def produce() -> int:
        async with Client(args.service_url) as client:
            producer = await client.create_producer(args.topic)
            sent = 0
            for _ in range(args.num_produce):
                for text in args.messages:
                    await producer.send(text.encode())
                    sent += 1
            print(f"{sent} messages successfully produced", flush=True)
        return 0

    return _run(produce)


def run_consume(args: argparse.Namespace) -> int:
    from client import Client, ConsumerType, InitialPosition

    async def consume() -> int:
        async with Client(args.service_url) as client:
            consumer = await client.subscribe(
                args.topic, args.subscription_name,
                consumer_type=ConsumerType[args.subscription_type],
                initial_position=InitialPosition[args.subscription_position])
            received = 0
            while args.num_messages == 0 or received < args.num_messages:
                message = await consumer.receive(int(args.timeout * 1000) if args.timeout else None)
                print(f"----- got message -----\nkey:[{message.partition_key()}], "
                      f"properties:[{message.properties()}], content:{message.data().decode(errors='replace')}",
                      flush=True)
                await consumer.acknowledge(message)
                received += 1
            print(f"{received} messages successfully consumed", flush=True)
        return 0

    return _run(consume)


def _run(main) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return run(main())
    except MiniPulsarError as error:
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
