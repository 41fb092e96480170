"""``minipulsar standalone``: a metastore, N bookies and M brokers (default 1) as supervised child processes.

Start order is the dependency order — metastore, bookie-0 .. bookie-N-1, then the brokers — and each
child starts only once the previous one printed READY. With ``--metadata-url`` no metastore is
started: every bookie and broker uses that store (ZooKeeper, or a metastore run on its own), the
bookies in BookKeeper's spelling of it (:func:`bookie_metadata_url`). When the brokers are ready
the launcher prints the service and admin URLs, two example commands, and its own
machine-readable line(s)::

    READY broker-<i> <host:port> http=<host:port>          (one per broker, only with --brokers > 1)
    READY standalone <first broker's host:port> http=<host:port>

Ctrl-C, SIGTERM or SIGHUP stops the broker, then the bookies, then the metastore (SIGTERM each,
SIGKILL past a deadline) and exits 0; a second Ctrl-C SIGKILLs whatever is left. Children die
with the launcher even when it is SIGKILLed, and without a terminal they share its process group,
so killing that group kills the whole cluster at once (supervisor.py). A child that
exits on its own is a failure: the launcher logs it with the tail of its log, stops the rest and
exits 1. Exit code 2 means the command line or the data dir is unusable (nothing was started).
Directory layout and bookie identity across restarts: see standalone_plan.py.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import fcntl
import logging
import os
import shlex
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from minipulsar.cli.common import setup_logging
from minipulsar.cli.standalone_plan import (
    DEFAULT_BOOKIE_HTTP_PORT,
    DEFAULT_BROKER_PORT,
    DEFAULT_METASTORE_HTTP_PORT,
    DEFAULT_METASTORE_PORT,
    DEFAULT_WEB_PORT,
    BookieSlot,
    BrokerSlot,
    StandalonePlan,
    StandaloneState,
    load_state,
    make_plan,
    save_state,
)
from minipulsar.cli.supervisor import (
    READY_TIMEOUT_S,
    Child,
    ChildFailedError,
    ReadyLine,
    Supervisor,
    describe_exit,
)
from minipulsar.config import parse_config_text
from minipulsar.errors import ConfigError
from minipulsar.metadata.zk_url import LEDGERS_ROOT, parse_zookeeper_url

log = logging.getLogger("minipulsar.standalone")

# Only a person's second Ctrl-C escalates to SIGKILL: process managers often deliver one SIGTERM
# twice (to the process and to its group), and that must still mean a clean stop.
_SECOND_SIGINT_AFTER_S = 0.5

_QUORUM_KEYS = ("managedLedgerDefaultEnsembleSize", "managedLedgerDefaultWriteQuorum", "managedLedgerDefaultAckQuorum")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "standalone",
        help="run a metastore, bookies and a broker on this machine",
        description="Start a local cluster as child processes; Ctrl-C stops it. Data survives restarts.",
    )
    p.add_argument("--data-dir", default="data/standalone", help="everything the cluster keeps (default: %(default)s)")
    p.add_argument("--bookies", type=int, default=1, help="number of bookies (default: %(default)s)")
    p.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="number of brokers; broker i uses BROKER_PORT+i and WEB_PORT+i (default: %(default)s)",
    )
    p.add_argument(
        "--journal-root", type=Path, help="bookie i journals in JOURNAL_ROOT/bookie-<i> (default: DATA_DIR/journal)"
    )
    p.add_argument(
        "--ledger-root", type=Path, help="bookie i ledgers in LEDGER_ROOT/bookie-<i> (default: DATA_DIR/ledgers)"
    )
    p.add_argument(
        "--broker-port", type=int, default=DEFAULT_BROKER_PORT, help="client (binary protocol) port; 0 = any free port"
    )
    p.add_argument("--web-port", type=int, default=DEFAULT_WEB_PORT, help="broker admin/metrics HTTP port")
    p.add_argument(
        "--metadata-url",
        metavar="URL",
        help="use this metadata store instead of starting a metastore: zk:host:port[,host:port][/chroot] "
        "(ZooKeeper; bookies get zk+hierarchical://host:port[;host:port][/chroot]/ledgers) or "
        "metastore://host:port",
    )
    p.add_argument(
        "--metastore-port", type=int, default=None, help=f"(default: {DEFAULT_METASTORE_PORT}; not with --metadata-url)"
    )
    p.add_argument(
        "--metastore-http-port",
        type=int,
        default=None,
        help=f"the metastore's /metrics port (metricsProvider.httpPort; default: {DEFAULT_METASTORE_HTTP_PORT}; "
        "0 = any free port; not with --metadata-url)",
    )
    p.add_argument(
        "--bookie-port",
        type=int,
        default=None,
        help="bookie i listens on BOOKIE_PORT+i (default: the ports of the last run, else 3181+i)",
    )
    p.add_argument(
        "--bookie-http-port", type=int, default=DEFAULT_BOOKIE_HTTP_PORT, help="bookie i serves HTTP on this + i"
    )
    p.add_argument("--bind-address", default="127.0.0.1", help="address every server binds (default: %(default)s)")
    p.add_argument(
        "--advertised-address",
        default=None,
        help="host in bookie ids and broker URLs (default: the bind address, or 127.0.0.1 for 0.0.0.0)",
    )
    p.add_argument(
        "--metastore-config", metavar="FILE", help="metastore.conf passed to the metastore (not with --metadata-url)"
    )
    p.add_argument("--bookie-config", metavar="FILE", help="bookkeeper.conf passed to every bookie")
    p.add_argument("--broker-config", metavar="FILE", help="broker.conf passed to the broker")
    p.add_argument(
        "--ready-timeout",
        type=float,
        default=READY_TIMEOUT_S,
        metavar="SECONDS",
        help="how long each child may take to become ready (default: %(default)g)",
    )
    p.add_argument("--log-level", default=None, help="DEBUG, INFO (default), WARNING, ERROR; passed to the children")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    # Plain asyncio rather than uvloop: the launcher only waits on a few pipes.
    return asyncio.run(run_standalone(args))


async def run_standalone(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    try:
        lock = await asyncio.to_thread(_lock_data_dir, data_dir)
    except ConfigError as exc:
        log.error("standalone cannot start: %s", exc)
        return 2
    try:
        _check_metastore_flags(args)
        state = await asyncio.to_thread(load_state, data_dir / "standalone.json")
        plan = make_plan(
            data_dir=data_dir,
            bookie_count=args.bookies,
            journal_root=args.journal_root,
            ledger_root=args.ledger_root,
            bind_address=args.bind_address,
            advertised_address=args.advertised_address,
            metastore_port=DEFAULT_METASTORE_PORT if args.metastore_port is None else args.metastore_port,
            metastore_http_port=DEFAULT_METASTORE_HTTP_PORT
            if args.metastore_http_port is None
            else args.metastore_http_port,
            broker_port=args.broker_port,
            web_port=args.web_port,
            bookie_port=args.bookie_port,
            bookie_http_port=args.bookie_http_port,
            state=state,
            broker_count=args.brokers,
            metadata_url=args.metadata_url,
        )
        options = await asyncio.to_thread(_child_options, args)
        await asyncio.to_thread(_prepare, plan)
        return await Launcher(plan, options, state).run()
    except ConfigError as exc:
        log.error("standalone cannot start: %s", exc)
        return 2
    finally:
        lock.close()


@dataclass(frozen=True, slots=True)
class ChildOptions:
    """Flags passed through to the children."""

    metastore_config: str | None = None
    bookie_config: str | None = None
    broker_config: str | None = None
    broker_config_keys: frozenset[str] = frozenset()
    """Keys the broker.conf sets itself: the launcher does not override those."""
    log_level: str | None = None
    ready_timeout_s: float = READY_TIMEOUT_S


def _check_metastore_flags(args: argparse.Namespace) -> None:
    """The metastore's own flags mean nothing when none is started: refuse them rather than ignore them."""
    if args.metadata_url is None:
        return
    given = [
        flag
        for flag, value in (
            ("--metastore-port", args.metastore_port),
            ("--metastore-http-port", args.metastore_http_port),
            ("--metastore-config", args.metastore_config),
        )
        if value is not None
    ]
    if given:
        verb = "configure" if len(given) > 1 else "configures"
        raise ConfigError(f"{' and '.join(given)} {verb} the metastore, which --metadata-url replaces")


def _child_options(args: argparse.Namespace) -> ChildOptions:
    keys: frozenset[str] = frozenset()
    if args.broker_config:
        try:
            values = parse_config_text(Path(args.broker_config).read_text(), args.broker_config)
            keys = frozenset(key for key, value in values.items() if value)  # key= leaves the default
        except OSError as exc:
            raise ConfigError(f"cannot read {args.broker_config}: {exc.strerror}") from exc
    if args.ready_timeout <= 0:
        raise ConfigError(f"--ready-timeout must be positive, got {args.ready_timeout:g}")
    return ChildOptions(
        args.metastore_config, args.bookie_config, args.broker_config, keys, args.log_level, args.ready_timeout
    )


def _lock_data_dir(data_dir: Path) -> IO[bytes]:
    """Hold DATA_DIR/standalone.lock for the launcher's life: one cluster per data dir."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        lock = open(data_dir / "standalone.lock", "ab")  # noqa: SIM115 -- held while the standalone runs
    except OSError as exc:
        raise ConfigError(f"cannot use data dir {data_dir}: {exc.strerror}") from exc
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise ConfigError(f"another minipulsar standalone is running on {data_dir}") from None
    return lock


def _prepare(plan: StandalonePlan) -> None:
    """Create the directories and check every fixed port is free (runs in a thread)."""
    metastore_dirs = [plan.metastore_dir] if plan.runs_metastore else []
    for path in (plan.log_dir, *metastore_dirs, *(d for b in plan.bookies for d in (b.journal_dir, b.ledger_dir))):
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create {path}: {exc.strerror}") from exc
    for owner, port in plan.fixed_ports():
        _check_port_free(owner, plan.bind_address, port)


def _check_port_free(owner: str, host: str, port: int) -> None:
    # SO_REUSEADDR as asyncio servers set it, so a port in TIME_WAIT from our last run is "free".
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
            hint = (
                " (a bookie keeps its port across restarts because its id host:port is in the "
                "ledger metadata; free the port, or pass --bookie-port to give the bookies new ids)"
                if owner.startswith("bookie-") and not owner.endswith("http")
                else ""
            )
            raise ConfigError(f"{owner} port {host}:{port} {why}{hint}") from None


class Launcher:
    """Starts the plan's children in order, announces the cluster, and stops it on a signal."""

    def __init__(self, plan: StandalonePlan, options: ChildOptions, state: StandaloneState) -> None:
        self.plan, self.options, self.state = plan, options, state
        self.supervisor = Supervisor()
        self._stop = asyncio.Event()
        self._stop_requested_at = 0.0
        self._interactive = sys.stdin is not None and sys.stdin.isatty()

    async def run(self) -> int:
        """0 after a requested stop, 1 when a child failed to start or died."""
        self._install_signal_handlers()
        stop_requested = asyncio.create_task(self._stop.wait())
        starting = asyncio.create_task(self._start_all())
        await asyncio.wait({starting, stop_requested}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            log.info("stop requested while starting")
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
            return await self._shutdown(0)
        try:
            brokers = starting.result()
        except ChildFailedError as exc:
            log.error("standalone cannot start: %s", exc)
            stop_requested.cancel()
            return await self._shutdown(1)
        except BaseException:
            await self._shutdown(1)
            raise
        self._announce(brokers)
        return await self._supervise(stop_requested)

    async def _supervise(self, stop_requested: asyncio.Task) -> int:
        child_exited = asyncio.create_task(self.supervisor.first_exit())
        await asyncio.wait({child_exited, stop_requested}, return_when=asyncio.FIRST_COMPLETED)
        if stop_requested.done():
            child_exited.cancel()
            return await self._shutdown(0)
        stop_requested.cancel()
        child = child_exited.result()
        log.error(
            "%s (pid %s) ended unexpectedly (%s); stopping the cluster\n%s",
            child.name,
            child.pid,
            describe_exit(child.returncode),
            await child.log_tail(),
        )
        return await self._shutdown(1)

    async def _shutdown(self, code: int) -> int:
        clean = await self.supervisor.stop_all()
        log.info("standalone stopped%s", "" if clean else " (not every child exited cleanly)")
        return code

    def _install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        now = time.monotonic()
        if not self._stop.is_set():
            log.info("received %s: stopping %s (Ctrl-C again to kill them)", sig.name, self._stop_order())
            self._stop.set()
            self._stop_requested_at = now
        elif sig == signal.SIGINT and now - self._stop_requested_at > _SECOND_SIGINT_AFTER_S:
            log.warning("received SIGINT again: killing every child")
            self.supervisor.kill_all()

    def _stop_order(self) -> str:
        return "brokers, bookies, metastore" if self.plan.runs_metastore else "brokers, bookies"

    async def _start_all(self) -> list[ReadyLine]:
        """Metastore (unless external), bookies, brokers, each after the previous is READY; returns
        the brokers' lines."""
        plan, opts = self.plan, self.options
        if plan.metadata_url is None:
            metastore = await self._start("metastore", "metastore", metastore_args(plan, opts))
            metadata_url = f"metastore://{_connect_host(metastore.host)}:{metastore.port}"
        else:
            metadata_url = plan.metadata_url
            log.info("metadata store: %s (no metastore started)", metadata_url)
        for slot in plan.bookies:
            ready = await self._start(
                slot.name, "bookie", bookie_args(plan, slot, bookie_metadata_url(metadata_url), opts)
            )
            await self._remember_bookie(slot, ready)
        return [
            await self._start(slot.name, "broker", broker_args(plan, metadata_url, opts, slot)) for slot in plan.brokers
        ]

    async def _start(self, name: str, role: str, args: list[str]) -> ReadyLine:
        # A terminal's Ctrl-C goes to its whole foreground group: keep the children out of it so
        # they stop in order. Without a terminal, share the launcher's group (see supervisor.py).
        child = Child(name, role, args, self.plan.log_dir / f"{name}.log", own_process_group=self._interactive)
        ready = await self.supervisor.start(child, self.options.ready_timeout_s)
        log.info("%s ready on %s%s", name, ready.address, f", http on port {ready.http[1]}" if ready.http else "")
        return ready

    async def _remember_bookie(self, slot: BookieSlot, ready: ReadyLine) -> None:
        """Record the bookie's identity as soon as it registered: later runs must reuse it."""
        if slot.port:
            assert ready.port == slot.port, f"{slot.name} asked for port {slot.port}, announced {ready.port}"
        if (
            self.state.bookie_ports.get(slot.name) == ready.port
            and self.state.advertised_address == self.plan.advertised_address
            and self.state.metadata_url == self.plan.metadata_url
        ):
            return
        self.state.bookie_ports[slot.name] = ready.port
        self.state.advertised_address = self.plan.advertised_address
        self.state.metadata_url = self.plan.metadata_url
        await asyncio.to_thread(save_state, self.plan.state_path, self.state)

    def _announce(self, brokers: list[ReadyLine]) -> None:
        addresses = []
        for broker in brokers:
            host = _display_host(broker.host, self.plan.advertised_address)
            addresses.append((f"{host}:{broker.port}", f"{host}:{broker.http[1]}" if broker.http else None))
        service_url = f"pulsar://{addresses[0][0]}"
        web = addresses[0][1]
        others = [a for a, _ in addresses[1:]]
        print(banner(self.plan, service_url, f"http://{web}" if web else None, others), flush=True)
        if len(brokers) > 1:
            for slot, (address, http) in zip(self.plan.brokers, addresses):
                print(f"READY {slot.name} {address}" + (f" http={http}" if http else ""), flush=True)
        print(f"READY standalone {addresses[0][0]}" + (f" http={web}" if web else ""), flush=True)


def banner(plan: StandalonePlan, service_url: str, web_url: str | None, other_brokers: list[str] | None = None) -> str:
    """What a person reads once the cluster is up (``other_brokers``: ``host:port`` of brokers 1..)."""
    prog = _program_name()
    default_url = service_url in ("pulsar://127.0.0.1:6650", "pulsar://localhost:6650")
    url_flag = "" if default_url else f" --service-url {service_url}"
    admin_flag = (
        "" if web_url in (None, "http://127.0.0.1:8080", "http://localhost:8080") else f" --admin-url {web_url}"
    )
    q = plan.quorum
    brokers = "broker" if plan.broker_count == 1 else f"{plan.broker_count} brokers"
    metadata = "metastore" if plan.metadata_url is None else f"metadata on {plan.metadata_url}"
    lines = [
        "",
        f"minipulsar standalone is running: {metadata}, {len(plan.bookies)} "
        f"bookie{'s' if len(plan.bookies) > 1 else ''} (ensemble/write/ack {q.ensemble_size}/"
        f"{q.write_quorum}/{q.ack_quorum}), {brokers}",
        f"  service URL: {service_url}",
        f"  admin URL:   {web_url or '(no HTTP port announced)'}",
    ]
    if other_brokers:  # any broker answers lookups; a client may name them all and fail over
        lines.append(f"  every broker: {service_url},{','.join(other_brokers)}")
    lines += [
        f"  data dir:    {plan.data_dir}   (logs in {plan.log_dir})",
        "Try, in another shell:",
        f"  {prog} produce my-topic -m hello -n 10{url_flag}",
        f"  {prog} consume my-topic -s sub -n 10{url_flag}",
    ]
    if other_brokers:
        lines.append(f"  {prog} admin namespaces bundles public/default{admin_flag}")
    lines += ["Ctrl-C stops the cluster; data stays in the data dir.", ""]
    return "\n".join(lines)


def _program_name() -> str:
    """How the user invoked us, so the example commands can be pasted as they are."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "minipulsar":
        return shlex.quote(argv0)
    return f"{shlex.quote(sys.executable)} -m minipulsar"


def _connect_host(host: str) -> str:
    """An address to connect to a server announced on ``host`` (a wildcard means loopback works)."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def _display_host(host: str, advertised: str) -> str:
    return advertised if host in ("0.0.0.0", "::", "") else host


# ---------------------------------------------------------------------------------------------
# Child command lines (pure; tests parse them with the real CLI parser).


def _common_flags(config: str | None, opts: ChildOptions) -> list[str]:
    flags = ["--config", config] if config else []
    return flags + (["--log-level", opts.log_level] if opts.log_level else [])


def metastore_args(plan: StandalonePlan, opts: ChildOptions) -> list[str]:
    return [
        "--port",
        str(plan.metastore_port),
        "--http-port",
        str(plan.metastore_http_port),
        "--data-dir",
        str(plan.metastore_dir),
        "--bind-address",
        plan.bind_address,
        *_common_flags(opts.metastore_config, opts),
    ]


def bookie_metadata_url(url: str) -> str:
    """The URL a bookie is given for the brokers' ``url``: BookKeeper's ``metadataServiceUri``.

    Pulsar's ``zk:h1:p1,h2:p2/chroot`` (or ``zk://``) is BookKeeper's
    ``zk+hierarchical://h1:p1;h2:p2/chroot/ledgers``: the same servers and chroot, with the
    ledgers root BookKeeper names in the path (both open the same store: ``minipulsar.metadata.zk_url``).
    Any other URL is given as it is.
    """
    if not url.startswith("zk:"):
        return url
    parsed = parse_zookeeper_url(url)
    servers = ";".join(f"{host}:{port}" for host, port in parsed.servers)
    return f"zk+hierarchical://{servers}{parsed.chroot}{LEDGERS_ROOT}"


def bookie_args(plan: StandalonePlan, slot: BookieSlot, metadata_url: str, opts: ChildOptions) -> list[str]:
    return [
        "--port",
        str(slot.port),
        "--http-port",
        str(slot.http_port),
        "--journal-dir",
        str(slot.journal_dir),
        "--ledger-dirs",
        str(slot.ledger_dir),
        "--metadata-url",
        metadata_url,
        "--bind-address",
        plan.bind_address,
        "--advertised-address",
        plan.advertised_address,
        *_common_flags(opts.bookie_config, opts),
    ]


def broker_args(
    plan: StandalonePlan, metadata_url: str, opts: ChildOptions, slot: BrokerSlot | None = None
) -> list[str]:
    """Broker ``slot``'s command line (the first broker's by default)."""
    slot = slot or plan.brokers[0]
    q = plan.quorum
    quorum = dict(zip(_QUORUM_KEYS, (q.ensemble_size, q.write_quorum, q.ack_quorum)))
    sets = [f"{key}={value}" for key, value in quorum.items() if key not in opts.broker_config_keys]
    return [
        "--port",
        str(slot.port),
        "--http-port",
        str(slot.web_port),
        "--metadata-url",
        metadata_url,
        "--bind-address",
        plan.bind_address,
        "--advertised-address",
        plan.advertised_address,
        *(flag for item in sets for flag in ("--set", item)),
        *_common_flags(opts.broker_config, opts),
    ]
