"""A bare socket speaking Pulsar's frames to a broker, for tests of the protocol's answers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.frames import PulsarFrame, PulsarFrameDecoder, encode_command
from tests.support.cluster import ProcessCluster

T = api.BaseCommand
SOCKET_TIMEOUT_S = 10.0


class RawPulsar:
    """A bare socket speaking Pulsar frames, every read bounded by a timeout."""

    def __init__(self, cluster: ProcessCluster) -> None:
        assert cluster.broker is not None
        host, port = cluster.broker.address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S)
        self._decoder = PulsarFrameDecoder()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def command(self, command: api.BaseCommand) -> None:
        self.send(encode_command(command))

    def next_frame(self) -> PulsarFrame | None:
        """The next frame, or None when the broker closed the connection."""
        while True:
            frame = self._decoder.next_frame()
            if frame is not None:
                return frame
            data = self.sock.recv(65536)
            if not data:
                return None
            self._decoder.feed(data)

    def connect(self) -> None:
        self.command(T(type=T.CONNECT, connect=api.CommandConnect(client_version="fuzz", protocol_version=21)))
        frame = self.next_frame()
        assert frame is not None and frame.command.type == T.CONNECTED

    def close(self) -> None:
        self.sock.close()


def raw_pulsar_fixture(*, connected: bool = False) -> Any:
    """A ``raw`` fixture: a :class:`RawPulsar` on the ``cluster`` fixture's broker, closed after
    the test; with ``connected``, past its CONNECT."""

    @pytest.fixture(name="raw")
    def raw_pulsar(cluster: ProcessCluster) -> Iterator[RawPulsar]:
        connection = RawPulsar(cluster)
        try:
            if connected:
                connection.connect()
            yield connection
        finally:
            connection.close()

    return raw_pulsar
