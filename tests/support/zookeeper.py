"""A real ZooKeeper server for tests: Debian's ``zookeeper`` package (3.8), on free ports.

One node (``ZooKeeperEnsemble(tmp, nodes=1)``) or an ensemble of three, each node a
``QuorumPeerMain`` JVM with its own ``zoo.cfg`` and data dir under the test's temp dir and its
log in ``zookeeper-<id>.log`` there. The settings suit tests:

- ``tickTime=100`` and ``minSessionTimeout=200``: sessions of a few hundred ms expire quickly;
- ``4lw.commands.whitelist=*``: ``srvr`` tells readiness and each node's mode
  (``standalone``, ``leader``, ``follower``);
- ``admin.enableServer=false``: no Jetty admin server on a well-known port.

Readiness is a condition, not a sleep: every node answers ``srvr`` with a serving mode.
:meth:`ZooKeeperEnsemble.kill` SIGKILLs a node (the leader, for failover tests, is
:meth:`~ZooKeeperEnsemble.leader`), :meth:`~ZooKeeperEnsemble.restart` starts it again on the
same ports and data, :meth:`~ZooKeeperEnsemble.stop` stops them all (TERM, then KILL).

Use::

    reason = zookeeper_unavailable_reason()        # None, or why no ZooKeeper can run here (skip with it)
    with ZooKeeperEnsemble(tmp_path, nodes=3) as zk:
        store = await open_metadata_store(zk.url)   # zk:127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3

or the fixtures :func:`zookeeper_fixture` makes, which skip visibly when ZooKeeper is missing
and cannot be installed (apt-get, as root, as :mod:`tests.support.faultfs` does for libfuse2).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from tests.support.apt import apt_install
from tests.support.net import free_ports

JAVA = "/usr/bin/java"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
"""Its manifest's Class-Path names its dependencies; logging needs a binding beside it."""
LOGGING_JARS = (Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar"))
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
TICK_TIME_MS = 100
MIN_SESSION_TIMEOUT_MS = 2 * TICK_TIME_MS
MAX_SESSION_TIMEOUT_MS = 60_000
READY_TIMEOUT_S = 60.0
"""JVM start and (for an ensemble) a leader election, on a loaded 2-core machine."""
STOP_TIMEOUT_S = 10.0
FOUR_LETTER_TIMEOUT_S = 2.0
SERVING_MODES = ("standalone", "leader", "follower")
LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=${zookeeper.log.file}
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] %m%n
"""


def _installed() -> bool:
    return os.access(JAVA, os.X_OK) and ZOOKEEPER_JAR.exists() and all(jar.exists() for jar in LOGGING_JARS)


def zookeeper_unavailable_reason() -> str | None:
    """Why no ZooKeeper server can run here, or None (Debian's ``zookeeper`` is installed with
    apt-get first when it is missing and we are root)."""
    if _installed():
        return None
    if os.geteuid() == 0 and shutil.which("apt-get"):
        apt_install(["zookeeper"], _installed, recommends=False)
        if _installed():
            return None
        return f"ZooKeeper: `apt-get install zookeeper` did not provide {ZOOKEEPER_JAR} and {JAVA}"
    return f"ZooKeeper: {ZOOKEEPER_JAR} or {JAVA} is missing (install Debian's zookeeper package, as root)"


def skip_unless_zookeeper() -> None:
    """``pytest.skip`` (visible, with the reason) when no ZooKeeper server can run here."""
    reason = zookeeper_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


def four_letter_word(port: int, word: str, timeout_s: float = FOUR_LETTER_TIMEOUT_S) -> str:
    """Send a four-letter command (``srvr``, ``ruok``, ``mntr``) to a node; "" when it does not answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperNode:
    """One ``QuorumPeerMain`` process: its id, ports, config and data dir."""

    def __init__(self, root: Path, node_id: int, client_port: int, quorum_port: int, election_port: int) -> None:
        self.node_id = node_id
        self.client_port, self.quorum_port, self.election_port = client_port, quorum_port, election_port
        self.dir = root / f"zookeeper-{node_id}"
        self.data_dir = self.dir / "data"
        self.config_path = self.dir / "zoo.cfg"
        self.log_path = root / f"zookeeper-{node_id}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def write_config(self, servers: list[ZooKeeperNode]) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={TICK_TIME_MS}",
            "initLimit=50",
            "syncLimit=20",
            f"minSessionTimeout={MIN_SESSION_TIMEOUT_MS}",
            f"maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}",
            f"dataDir={self.data_dir}",
            f"clientPort={self.client_port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            "maxClientCnxns=0",
        ]
        if len(servers) > 1:
            (self.data_dir / "myid").write_text(f"{self.node_id}\n")
            lines += [f"server.{s.node_id}=127.0.0.1:{s.quorum_port}:{s.election_port}" for s in servers]
        self.config_path.write_text("\n".join(lines) + "\n")
        (self.dir / "log4j.properties").write_text(LOG4J_PROPERTIES)

    def start(self) -> None:
        assert not self.running, f"zookeeper {self.node_id} already running"
        classpath = ":".join(str(jar) for jar in (ZOOKEEPER_JAR, *LOGGING_JARS))
        command = [
            JAVA,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # a test server: start fast, the C1 compiler is enough
            f"-Dlog4j.configuration=file:{self.dir / 'log4j.properties'}",
            f"-Dzookeeper.log.file={self.log_path}",
            "-cp",
            classpath,
            MAIN_CLASS,
            str(self.config_path),
        ]
        with open(self.log_path, "ab") as output:  # the JVM's own stdout/stderr (crashes, usage)
            self.proc = subprocess.Popen(
                command, stdout=output, stderr=output, stdin=subprocess.DEVNULL, start_new_session=True
            )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def mode(self) -> str | None:
        """``standalone``, ``leader`` or ``follower`` while it serves; None otherwise."""
        if not self.running:
            return None
        for line in four_letter_word(self.client_port, "srvr").splitlines():
            if line.startswith("Mode: "):
                mode = line.removeprefix("Mode: ").strip()
                return mode if mode in SERVING_MODES else None
        return None

    def kill(self) -> None:
        """SIGKILL (no clean shutdown) and reap."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM (after a SIGCONT, in case a test paused it), then SIGKILL after a timeout."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def pause(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return f"(no log at {self.log_path})"
        return f"--- last lines of {self.log_path} ---\n" + "\n".join(text.splitlines()[-lines:])


class ZooKeeperEnsemble:
    """``nodes`` ZooKeeper servers on 127.0.0.1 (1: standalone; 3: a quorum), started by
    :meth:`start` (or ``with``) and always stopped by :meth:`stop`."""

    def __init__(self, root: Path, nodes: int = 1) -> None:
        assert nodes >= 1
        root.mkdir(parents=True, exist_ok=True)
        ports = free_ports(3 * nodes)
        self.nodes = [
            ZooKeeperNode(root, i + 1, ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]) for i in range(nodes)
        ]
        for node in self.nodes:
            node.write_config(self.nodes)

    @property
    def url(self) -> str:
        """Our (Pulsar's) metadata URL: ``zk:host:port[,host:port...]``."""
        return "zk:" + self.connect_string

    @property
    def connect_string(self) -> str:
        """ZooKeeper's ``host:port,host:port`` form."""
        return ",".join(node.address for node in self.nodes)

    def start(self, ready_timeout_s: float = READY_TIMEOUT_S) -> ZooKeeperEnsemble:
        for node in self.nodes:
            node.start()
        self.wait_ready(ready_timeout_s)
        return self

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S, nodes: list[ZooKeeperNode] | None = None) -> None:
        """Until every running node (or each of ``nodes``) serves, with one leader among them."""
        deadline = time.monotonic() + timeout_s
        waiting = nodes if nodes is not None else [node for node in self.nodes if node.running]
        while True:
            modes = {node.node_id: node.mode() for node in waiting}
            if all(modes.values()) and (len(self.nodes) == 1 or self.leader() is not None):
                return
            dead = [node for node in waiting if not node.running]
            if dead or time.monotonic() > deadline:
                tails = "\n".join(node.log_tail() for node in waiting)
                what = f"exited: {[n.node_id for n in dead]}" if dead else f"not serving within {timeout_s}s"
                raise RuntimeError(f"zookeeper {what} (modes {modes})\n{tails}")
            time.sleep(0.1)  # polling a condition with a deadline, in a fixture's thread

    def leader(self) -> int | None:
        """The index in :attr:`nodes` of the node that leads (or serves standalone), if any."""
        for index, node in enumerate(self.nodes):
            if node.mode() in ("leader", "standalone"):
                return index
        return None

    def kill(self, index: int) -> None:
        """SIGKILL node ``index``."""
        self.nodes[index].kill()

    def restart(self, index: int, ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start node ``index`` again, on its ports and data, and wait until it serves."""
        node = self.nodes[index]
        node.stop()
        node.start()
        self.wait_ready(ready_timeout_s, [node])

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()

    def __enter__(self) -> ZooKeeperEnsemble:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def _ensemble_running(root: Path, nodes: int) -> Iterator[ZooKeeperEnsemble]:
    skip_unless_zookeeper()
    with ZooKeeperEnsemble(root, nodes) as ensemble:
        yield ensemble


def zookeeper_fixture(*, nodes: int = 1, per_module: bool = False, name: str = "zookeeper") -> Any:
    """A fixture named ``name``: a :class:`ZooKeeperEnsemble` of ``nodes``, per test or per
    module, skipped with the reason when ZooKeeper is missing and cannot be installed."""
    if per_module:

        @pytest.fixture(name=name, scope="module")
        def module_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
            yield from _ensemble_running(tmp_path_factory.mktemp("zookeeper"), nodes)

        return module_zookeeper

    @pytest.fixture(name=name)
    def per_test_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
        yield from _ensemble_running(tmp_path / "zookeeper", nodes)

    return per_test_zookeeper
