"""Fuzzing the servers' ports with hypothesis: what to send, what the answer must be.

Binary ports (metastore ``clientPort``, ``bookiePort``, ``brokerServicePort``):

- :func:`byte_streams` draws one connection's bytes: an optional CONNECT, then frames of valid
  commands, *near-valid* commands (a valid command's wire map with one field dropped, retyped,
  given an edge value — huge, negative, NaN, deeply nested — or an unknown key added), framed
  msgpack values and garbage, random length prefixes and loose bytes; cut into several writes.
  Everything comes from each command class's ``_FIELDS`` (:mod:`minipulsar.protocol.schema`), so
  a new command or field is fuzzed without touching this module.
- :func:`expected_outcome` predicts, from the bytes alone and the server's frame limit, what
  the server owes: an answer to the closing *sync* request, an ERROR then a close (a refused
  handshake), ERROR TooLarge then a close, or nothing (the stream ends inside a frame); on the
  broker's port, whose first bytes choose the protocol, a first frame of neither protocol is
  refused, and one of Pulsar's is left to the Pulsar fuzz test.
- :func:`exchange` sends the writes, collects the answers, and :func:`check_answers` holds them
  to the contract: every frame a valid command, every error code typed (never UnknownError).

HTTP ports (the broker's ``webServicePort``, the bookie's ``httpServerPort``):

- :func:`http_requests` draws requests against the routes a server registers (taken from the
  route tables themselves), with random methods, path segments (traversal, long, unicode, raw
  or percent-encoded), query strings, headers and bodies (bad JSON, wrong types, deep, huge);
- :func:`http_exchange` sends one over a raw socket (no client library tidies it up) and
  parses the status; :func:`check_http_answer`: never a 5xx, a 4xx has a body, JSON errors
  carry their reason.

Runs are reproducible: :data:`FUZZ_SETTINGS` derandomizes (a fixed seed per test) with a small
example budget; ``MINIPULSAR_FUZZ_EXAMPLES=N`` runs N random examples per test instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
import itertools
import json
import math
import os
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgpack
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from minipulsar.binary_protocol.detect import SNIFF_BYTES, sniff
from minipulsar.errors import ErrorCode, FrameTooLargeError, MalformedCommandError
from minipulsar.protocol.codec import decode_body, encode_bytes
from minipulsar.protocol.commands import PROTOCOL_VERSION, Connect, Error, LookupResponse, Ping, Pong, SendError
from minipulsar.protocol.frames import LENGTH, FrameDecoder
from minipulsar.protocol.schema import REGISTRY, Command, FieldSpec, decode_command, request_id
from tests.support.protocol_strategies import (
    COMMAND_CLASSES,
    INT_MAX,
    INT_MIN,
    WRONG_VALUES,
    commands_of,
    framed,
    is_accepted,
    msgpack_values,
    strategy_for,
)

EXAMPLES_ENV = "MINIPULSAR_FUZZ_EXAMPLES"
"""Set to a number of examples per test for a longer, random (not derandomized) run."""


def fuzz_settings(ci_examples: int) -> settings:
    """``ci_examples`` derandomized examples, or ``$MINIPULSAR_FUZZ_EXAMPLES`` random ones.

    No deadline (a real server on shared cores), no example database (a CI run is the same
    run every time), and the health checks that real I/O trips are off.
    """
    wanted = os.environ.get(EXAMPLES_ENV)
    return settings(
        max_examples=int(wanted) if wanted else ci_examples,
        derandomize=not wanted,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )


EXCHANGE_TIMEOUT_S = 15.0
"""How long the answers to one example may take (shared, loaded cores)."""
SYNC_ID = 0x5EC0_FFEE_0051
"""The id of the request that ends every stream: its answer means every frame before was handled."""

# --------------------------------------------------------------------------------------------
# Values: edge cases of each wire type


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


HUGE_BYTES = 1 << 20
"""A "huge" value: 1 MiB, far above any sane field and below every frame limit."""

_huge_text = st.sampled_from([300, 70_000, HUGE_BYTES]).map(lambda n: "x" * n)
_deep_list = st.sampled_from([50, 500]).map(_nested)
"""msgpack packs at most 512 levels; deeper bodies are built by hand (:func:`frames_for`)."""
_odd_text = st.sampled_from(["", "/", "//", "..", "../../etc/passwd", "\x00", "é/ü", "\ud7ff", "a" * 81, " ", "%2e"])

EDGE_VALUES: dict[type, st.SearchStrategy[Any]] = {
    int: st.sampled_from([0, -1, 1, -(2**31), 2**31, 2**53 + 1, 2**63 - 1, INT_MIN, INT_MAX, 2**32]),
    float: st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324]),
    str: _odd_text | _huge_text | st.text(max_size=20),
    bytes: st.sampled_from([b"", b"\x00", b"\xff" * 7]) | _huge_text.map(str.encode),
    list: st.sampled_from([[], [None], [[1, 2, 3]], [[-1, -1]], [[2**64 - 1, 0]], [1.5, "x"]])
    | _deep_list
    | st.integers(1000, 20_000).map(lambda n: [[0, i] for i in range(n)]),
    dict: st.sampled_from([{}, {"": None}, {"t": "CONNECT"}]) | _deep_list.map(lambda deep: {"k": deep}),
    bool: st.booleans(),
    type(None): st.none(),
    object: msgpack_values | _deep_list,
}
"""Values of the right type that a careless handler trips on."""


@functools.cache
def edge_value(spec: FieldSpec) -> st.SearchStrategy[Any]:
    """An edge value of one of the types ``spec`` accepts (ignoring a Literal's choices)."""
    return st.one_of([EDGE_VALUES[t] for t in spec.accepted if t in EDGE_VALUES])


@functools.cache
def wrong_value(spec: FieldSpec) -> st.SearchStrategy[Any]:
    """A value of a type ``spec`` does not accept (or, for a Literal, a value outside its choices)."""
    wrong = [v for v in WRONG_VALUES if not is_accepted(v, spec.accepted)]
    if spec.choices is not None:
        wrong += ["", "Sharde", "individual ", 7]
    values = st.sampled_from(wrong) if wrong else st.nothing()
    return values | (
        msgpack_values.filter(lambda v: not is_accepted(v, spec.accepted))
        if object not in spec.accepted
        else st.nothing()
    )


# --------------------------------------------------------------------------------------------
# Wire maps: valid, then bent


MUTATIONS = ("drop", "wrong", "edge", "edge", "extra", "type")
"""How :func:`near_valid_wire` bends a command; ``edge`` and ``extra`` keep it valid on the wire
(the handler, not the schema, must refuse what it cannot serve)."""


@st.composite
def near_valid_wire(
    draw: st.DrawFn, classes: Sequence[type[Command]], realistic: Realistic, mutations: Sequence[str] = MUTATIONS
) -> dict[Any, Any]:
    """A valid command's wire map with one to three ``mutations``."""
    cls = draw(st.sampled_from(classes))
    wire: dict[Any, Any] = draw(commands_for(cls, realistic)).to_wire()
    specs = {spec.name: spec for spec in cls._FIELDS}
    for _ in range(draw(st.integers(1, 3))):
        mutation = draw(st.sampled_from(mutations))
        name = draw(st.sampled_from(sorted(specs))) if specs else None
        if mutation == "drop" and name is not None:
            wire.pop(name, None)
        elif mutation == "wrong" and name is not None:
            wire[name] = draw(wrong_value(specs[name]))
        elif mutation == "edge" and name is not None:
            wire[name] = draw(edge_value(specs[name]))
        elif mutation == "extra":
            wire[draw(st.text(max_size=12) | st.sampled_from(["t ", "ID", "id", "payload"]))] = draw(msgpack_values)
        elif mutation == "type":
            wire["t"] = draw(st.sampled_from(sorted(REGISTRY)) | st.sampled_from([cls.TYPE.lower(), "", 7, None]))
    return wire


Realistic = Mapping[str, Sequence[Any]]
"""Values worth trying by field name (a topic that exists, a path under a real prefix): half
the time a field so named takes one, so the handlers get past their first checks."""


def commands_for(cls: type[Command], realistic: Realistic, payload_bytes_max: int = 256) -> st.SearchStrategy[Command]:
    """Valid instances of ``cls`` as :func:`commands_of` draws them, with ``realistic`` values.

    Strategies are built once per (class, mapping): building them per draw costs more than
    the draw itself."""
    key = (cls, id(realistic), payload_bytes_max)
    if key not in _COMMANDS:
        _COMMANDS[key] = _commands_for(cls, realistic, payload_bytes_max)
    return _COMMANDS[key]


_COMMANDS: dict[tuple[type[Command], int, int], st.SearchStrategy[Command]] = {}


def _commands_for(cls: type[Command], realistic: Realistic, payload_bytes_max: int) -> st.SearchStrategy[Command]:
    if not any(spec.name in realistic for spec in cls._FIELDS):
        return commands_of(cls, payload_bytes_max)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for spec in cls._FIELDS:
        values = strategy_for(spec, payload_bytes_max)
        if spec.name in realistic:
            values = st.sampled_from(list(realistic[spec.name])) | values
        fields[spec.name] = values if spec.default is dataclasses.MISSING else values | st.just(_UNSET)
    return st.fixed_dictionaries(fields).map(lambda v: cls(**{k: x for k, x in v.items() if x is not _UNSET}))


_UNSET = object()


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


FRAME_KINDS = {
    "valid": 6,
    "edgy": 6,
    "bent": 4,
    "other port": 1,
    "other port, bent": 1,
    "not a map": 1,
    "deep": 1,
    "garbage body": 1,
}
"""How often each kind of frame is drawn (relative weights): mostly what reaches the handlers."""


def frames_for(classes: Sequence[type[Command]], realistic: Realistic) -> st.SearchStrategy[bytes]:
    """One whole frame of a stream, of one of the :data:`FRAME_KINDS`: a valid command of
    ``classes`` (realistic values half the time), a valid one with edge values, a bent one, a
    command of another port, a framed msgpack value that is not a map, msgpack nested deeper
    than the unpacker allows, or a garbage body. Built once per (classes, mapping)."""
    key = (tuple(classes), id(realistic))
    if key not in _FRAMES:
        _FRAMES[key] = _frames_for(classes, realistic)
    return _FRAMES[key]


_FRAMES: dict[tuple[tuple[type[Command], ...], int], st.SearchStrategy[bytes]] = {}


def _frames_for(classes: Sequence[type[Command]], realistic: Realistic) -> st.SearchStrategy[bytes]:
    kinds: dict[str, st.SearchStrategy[bytes]] = {
        "valid": st.sampled_from(classes).flatmap(lambda cls: commands_for(cls, realistic)).map(encode_bytes),
        "edgy": near_valid_wire(classes, realistic, ("edge", "edge", "extra")).map(lambda wire: framed(_pack(wire))),
        "bent": near_valid_wire(classes, realistic).map(lambda wire: framed(_pack(wire))),
        "other port": st.sampled_from(COMMAND_CLASSES)
        .flatmap(lambda cls: commands_of(cls, payload_bytes_max=64))
        .map(encode_bytes),
        "other port, bent": near_valid_wire(COMMAND_CLASSES, realistic).map(lambda wire: framed(_pack(wire))),
        "not a map": (msgpack_values | st.floats() | _deep_list).map(lambda value: framed(_pack(value))),
        "deep": st.sampled_from([600, 200_000]).map(lambda depth: framed(b"\x91" * depth + b"\xc0")),
        "garbage body": st.binary(max_size=64).map(framed),
    }
    weighted = [kind for kind, weight in FRAME_KINDS.items() for _ in range(weight)]
    return st.sampled_from(weighted).flatmap(kinds.__getitem__)


desync_pieces = st.one_of(
    st.builds(
        lambda n, tail: LENGTH.pack(n) + tail, st.integers(0, 2**32 - 1) | st.integers(0, 300), st.binary(max_size=32)
    ),
    st.binary(min_size=1, max_size=16),
)
"""A piece that leaves the stream off frame boundaries: a random length prefix, loose bytes."""


_NO_VALUES: Realistic = {}

CONNECT = encode_bytes(Connect(id=1, protocol_version=PROTOCOL_VERSION, client_version="fuzz"))


@dataclasses.dataclass(frozen=True)
class ByteStream:
    """One connection's input: ``writes`` sent one by one, ending with the sync request."""

    writes: tuple[bytes, ...]
    sync_offset: int
    """Where the sync request's frame starts in the joined writes."""

    @property
    def data(self) -> bytes:
        return b"".join(self.writes)

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        data = self.data
        shown = data if len(data) <= 2000 else data[:2000] + b"..."
        return f"ByteStream({len(self.writes)} writes, {len(data)} bytes, sync at {self.sync_offset}: {shown!r})"


@st.composite
def byte_streams(
    draw: st.DrawFn, classes: Sequence[type[Command]], sync: Command, realistic: Realistic | None = None
) -> ByteStream:
    """A handshake (usually), pieces from :func:`frames_for`, the sync request; in 1-5 writes."""
    head = draw(st.sampled_from([CONNECT, CONNECT, CONNECT, b""]))
    pieces = draw(st.lists(frames_for(classes, realistic or _NO_VALUES), max_size=6))
    if draw(st.integers(0, 4)) == 0:
        pieces.insert(draw(st.integers(0, len(pieces))), draw(desync_pieces))
    data = head + b"".join(pieces)
    sync_offset = len(data)
    data += encode_bytes(sync)
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=4))))
    bounds = [0, *[c for c in cuts if c < len(data)], len(data)]
    writes = tuple(data[a:b] for a, b in itertools.pairwise(bounds) if b > a)
    return ByteStream(writes, sync_offset)


# --------------------------------------------------------------------------------------------
# What the server owes


class StreamOutcome(enum.Enum):
    ANSWERED = "the sync request is answered"
    REFUSED = "an ERROR, then the server closes (a refused handshake)"
    TOO_LARGE = "ERROR TooLarge, then the server closes"
    NOTHING_DUE = "the stream ends inside a frame: nothing is owed"
    PULSAR = "the broker takes it for Pulsar's protocol: tests/cluster/test_pulsar_protocol_fuzz.py judges that"


def expected_outcome(stream: ByteStream, max_frame_size: int, sniffs: bool = False) -> StreamOutcome:
    """What the server must do with ``stream``, by replaying its framing and handshake rules;
    ``sniffs``: the server first tells the protocols apart, as the broker's port does."""
    if sniffs:
        try:
            protocol = sniff(stream.data[:SNIFF_BYTES], max_frame_size)
        except MalformedCommandError:
            return StreamOutcome.REFUSED
        if protocol == "pulsar":
            return StreamOutcome.PULSAR
    frames = FrameDecoder(max_frame_size)
    frames.feed(stream.data)
    handshake_done = False
    while True:
        try:
            span = frames.next_span()
        except FrameTooLargeError:
            return StreamOutcome.TOO_LARGE
        if span is None:
            return StreamOutcome.NOTHING_DUE
        if span[0] - LENGTH.size == stream.sync_offset:  # the sync request is framed as sent
            return StreamOutcome.ANSWERED if handshake_done else StreamOutcome.REFUSED
        try:
            command = decode_body(bytes(frames.view[span[0] : span[1]]))
        except MalformedCommandError:
            continue  # answered InvalidCommand; the connection goes on
        if handshake_done or isinstance(command, Ping | Pong):
            continue
        if isinstance(command, Connect) and command.protocol_version == PROTOCOL_VERSION:
            handshake_done = True
            continue
        return StreamOutcome.REFUSED


@dataclasses.dataclass
class Answers:
    """What the server sent on one connection."""

    commands: list[Command]
    closed: bool
    """The server closed (or reset) the connection."""
    synced: bool
    """The sync request was answered."""


async def exchange(
    host: str, port: int, stream: ByteStream, outcome: StreamOutcome, timeout_s: float = EXCHANGE_TIMEOUT_S
) -> Answers:
    """Send ``stream`` write by write; read until the answer to :data:`SYNC_ID`, until the
    server closes (``outcome`` says it must), or not at all (nothing is due). Each frame the
    server sends must decode as a command."""
    reader, writer = await asyncio.open_connection(host, port)
    answers = Answers([], closed=False, synced=False)
    try:
        for data in stream.writes:
            writer.write(data)
            await writer.drain()
            await asyncio.sleep(0.001)  # separate segments: the server reads them apart
        if outcome not in (StreamOutcome.NOTHING_DUE, StreamOutcome.PULSAR):
            async with asyncio.timeout(timeout_s):
                await _read_answers(reader, answers, until_closed=outcome is not StreamOutcome.ANSWERED)
    except (ConnectionResetError, BrokenPipeError):
        answers.closed = True  # closed with our unsent or unread bytes
    finally:
        writer.close()
    return answers


async def _read_answers(reader: asyncio.StreamReader, answers: Answers, until_closed: bool) -> None:
    frames = FrameDecoder(1 << 30)
    while True:
        data = await reader.read(65536)
        if not data:
            answers.closed = True
            return
        frames.feed(data)
        while (body := frames.next_frame()) is not None:
            command = decode_command(msgpack.unpackb(body, raw=False))  # the server sends only valid commands
            answers.commands.append(command)
            if request_id(command) == SYNC_ID and command.RESPONSE:
                answers.synced = True
                if not until_closed:
                    return
        frames.compact()


TYPED_CODES = frozenset(code.value for code in ErrorCode) - {ErrorCode.UNKNOWN_ERROR.value}
"""The codes an answer to bad input may carry: any typed one, never UnknownError (a bug)."""


def check_answers(answers: Answers, outcome: StreamOutcome) -> None:
    """The contract of a binary port, for what ``outcome`` says the server owed."""
    for command in answers.commands:
        if isinstance(command, Error | SendError):
            assert command.code in TYPED_CODES, f"untyped error code in {command!r}"
        elif isinstance(command, LookupResponse) and command.error:
            assert command.error in TYPED_CODES, f"untyped error code in {command!r}"
    errors = [c for c in answers.commands if isinstance(c, Error)]
    if outcome is StreamOutcome.ANSWERED:
        assert answers.synced, f"the sync request was not answered; closed={answers.closed}: {answers.commands}"
    elif outcome is StreamOutcome.REFUSED:
        assert errors and answers.closed, f"a refused handshake needs an ERROR and a close: {answers}"
    elif outcome is StreamOutcome.TOO_LARGE:
        assert answers.closed and any(e.code == ErrorCode.TOO_LARGE.value for e in errors), answers


# --------------------------------------------------------------------------------------------
# HTTP


@dataclasses.dataclass(frozen=True)
class HttpRequest:
    method: str
    target: str
    """The request target as sent: path and query, percent-encoded or raw."""
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def __repr__(self) -> str:
        body = self.body if len(self.body) <= 300 else self.body[:300] + b"..."
        target = self.target if len(self.target) <= 300 else self.target[:300] + "..."
        return f"HttpRequest({self.method} {target!r} headers={self.headers} body={body!r} ({len(self.body)} bytes))"

    def encode(self, host: str) -> bytes:
        lines = [f"{self.method} {self.target} HTTP/1.1", f"Host: {host}", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in self.headers]
        if self.body or self.method in ("PUT", "POST"):
            lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape") + self.body


def route_paths(routes: Iterable[Any]) -> list[tuple[str, str]]:
    """``(method, path template)`` of each aiohttp ``RouteDef``, plus ``GET /metrics``."""
    return sorted({(route.method, route.path) for route in routes} | {("GET", "/metrics")})


_SEGMENT_FUZZ = st.one_of(
    _odd_text,
    st.text(max_size=30),
    st.sampled_from(["%2e%2e", "%2F", "%00", "%ff%fe", "..%2F..", "~", "0x00000000_0xffffffff", "0xZZ_0x", "-1"]),
    st.sampled_from([300, 5000, 9000]).map(lambda n: "s" * n),
)


def _placeholder_name(segment: str) -> str:
    return segment[1:-1].split(":", 1)[0]


@st.composite
def _path(draw: st.DrawFn, template: str, realistic: Mapping[str, Sequence[str]]) -> str:
    """``template`` with each ``{name}`` filled by a realistic value or a fuzzed one."""
    parts = []
    for segment in template.split("/"):
        if segment.startswith("{") and segment.endswith("}"):
            known = realistic.get(_placeholder_name(segment), ["fuzz"])
            fuzzed = draw(st.integers(0, 9)) < 3  # else realistic: the request reaches the handler
            segment = draw(_SEGMENT_FUZZ if fuzzed else st.sampled_from(list(known)))
        elif draw(st.integers(0, 19)) == 0:
            segment = draw(_SEGMENT_FUZZ)  # now and then a fixed part is bent too
        parts.append(segment)
    return "/".join(parts)


def _encode_path(path: str, raw: bool) -> str:
    return path if raw else urllib.parse.quote(path, safe="/%")


_QUERY_KEYS = st.sampled_from(["authoritative", "destinationBroker", "unload", "splitAlgorithmName"]) | st.text(
    max_size=10
)
_QUERY_VALUES = st.sampled_from(["true", "false", "1", "", "yes", "range_equally_divide", "127.0.0.1:1"]) | st.text(
    max_size=20
)

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(INT_MIN, INT_MAX) | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
_BODY_KEYS = st.sampled_from(
    ["readOnly", "forceMajor", "forceMinor", "bundles", "numBundles", "boundaries", "adminRoles", "allowedClusters"]
)
_BODIES = st.one_of(
    st.just(b""),
    _JSON.map(lambda value: json.dumps(value).encode()),
    st.dictionaries(_BODY_KEYS, _JSON | st.dictionaries(_BODY_KEYS, _JSON, max_size=3), max_size=3).map(
        lambda value: json.dumps(value).encode()
    ),
    st.sampled_from([b"NaN", b"-Infinity", b"{", b"[1,", b'{"readOnly": tru}', b"\xff\xfe", b"1e999", b"9" * 5000]),
    st.sampled_from([100, 2000, 100_000]).map(lambda depth: b"[" * depth + b"]" * depth),
    st.sampled_from([100, 2000, 100_000]).map(lambda depth: b'{"a":' * depth + b"1" + b"}" * depth),
    st.sampled_from([HUGE_BYTES // 2, 2 * HUGE_BYTES]).map(lambda n: json.dumps("x" * n).encode()),
    st.binary(max_size=64),
)
_HEADER_NAMES = st.sampled_from(
    ["Content-Type", "Accept", "Cookie", "Authorization", "X-Forwarded-For", "Content-Encoding", "Expect"]
) | st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
_HEADER_VALUES = st.sampled_from(
    ["application/json", "text/plain; charset=latin-1", "multipart/form-data; boundary=x", "gzip", "100-continue"]
) | st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)
_METHODS = st.sampled_from(
    ["GET", "PUT", "POST", "DELETE", "HEAD", "OPTIONS", "PATCH", "GET", "PUT"]
) | st.sampled_from(["PROPFIND", "BREW", "get", "CONNECT"])


@st.composite
def http_requests(
    draw: st.DrawFn, routes: Sequence[tuple[str, str]], realistic: Mapping[str, Sequence[str]]
) -> HttpRequest:
    """A request aimed at one of ``routes`` (usually with its method), or at a random path."""
    method, template = draw(st.sampled_from(list(routes)))
    if draw(st.integers(0, 9)) < 3:
        method = draw(_METHODS)
    random_path = draw(st.integers(0, 19)) == 0
    path = "/" + draw(st.text(max_size=40)) if random_path else draw(_path(template, realistic))
    raw = draw(st.integers(0, 9)) == 0  # as typed: the server's parser refuses most of these
    target = _encode_path(path, raw)
    query = draw(st.lists(st.tuples(_QUERY_KEYS, _QUERY_VALUES), max_size=3))
    if query:
        target += "?" + ("&".join(f"{k}={v}" for k, v in query) if raw else urllib.parse.urlencode(query))
    headers = tuple(draw(st.lists(st.tuples(_HEADER_NAMES, _HEADER_VALUES), max_size=3)))
    headers = tuple((name, value) for name, value in headers if name.lower() not in _FRAMING_HEADERS)
    return HttpRequest(method, target, headers, draw(_BODIES))


_FRAMING_HEADERS = {"content-length", "transfer-encoding", "host", "connection"}
"""Headers the request encoder sets itself (a wrong length would leave the server waiting)."""


@dataclasses.dataclass
class HttpAnswer:
    status: int
    headers: dict[str, str]
    body: bytes


BODY_BYTES_UNREAD_MIN = 64 * 1024
"""A body this long may be cut off by a reset: a server that refuses a request on its head
(a bad request line, 413 for a body over aiohttp's 1 MiB ``client_max_size``) closes with the
body unread in its socket, the kernel then resets the connection, and the answer can be lost."""


async def http_exchange(
    host: str, port: int, request: HttpRequest, timeout_s: float = EXCHANGE_TIMEOUT_S
) -> HttpAnswer | None:
    """Send ``request`` on a fresh connection and read the whole answer (the server closes)
    while sending; None when the server reset the connection before it could be read."""
    reader, writer = await asyncio.open_connection(host, port)
    reading = asyncio.ensure_future(reader.read())  # read while sending: an early answer is taken
    try:
        async with asyncio.timeout(timeout_s):
            try:
                writer.write(request.encode(f"{host}:{port}"))
                await writer.drain()
            except (ConnectionResetError, BrokenPipeError):
                pass  # refused before it read everything: the answer may still be there
            raw = await reading
    except (ConnectionResetError, BrokenPipeError):
        return None
    finally:
        reading.cancel()
        writer.close()
    return parse_http_answer(raw) if raw else None


def parse_http_answer(raw: bytes) -> HttpAnswer:
    """The final answer in ``raw`` (after any interim ``100 Continue``)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    while head.startswith(b"HTTP/1.1 1") and body.startswith(b"HTTP/"):
        head, _, body = body.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines and lines[0].startswith("HTTP/1."), f"not an HTTP answer: {raw[:200]!r}"
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return HttpAnswer(status, headers, body)


def check_http_answer(request: HttpRequest, answer: HttpAnswer | None, reason_key: str) -> None:
    """Never a 5xx; a 4xx says why (a JSON error holds a ``reason_key`` string); no answer
    only to a body of :data:`BODY_BYTES_UNREAD_MIN` or more."""
    if answer is None:
        assert len(request.body) >= BODY_BYTES_UNREAD_MIN, f"{request!r}: the server closed without answering"
        return
    assert answer.status < 500, f"{request!r} answered {answer.status}: {answer.body[:500]!r}"
    if answer.status < 400:
        return
    if request.method != "HEAD":
        assert answer.body.strip(), f"{request!r} answered {answer.status} with no body"
    if answer.headers.get("content-type", "").startswith("application/json") and answer.body:
        error = json.loads(answer.body)
        assert isinstance(error, dict) and isinstance(error.get(reason_key), str), answer.body[:500]
