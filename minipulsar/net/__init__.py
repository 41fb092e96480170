"""asyncio networking: connections, request correlation, write coalescing, listeners."""

from minipulsar.net.client import connect, parse_address
from minipulsar.net.connection import Connection
from minipulsar.net.loop import new_event_loop, run, tune_malloc
from minipulsar.net.server import Listener, ServerConnection, handles

__all__ = [
    "Connection",
    "Listener",
    "ServerConnection",
    "connect",
    "handles",
    "new_event_loop",
    "parse_address",
    "run",
    "tune_malloc",
]
