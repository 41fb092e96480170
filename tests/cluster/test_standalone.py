"""``minipulsar standalone``: the supervisor on fake servers, then the launcher on the real ones.

Fake servers (a short script that prints a READY line, or misbehaves on request) pin down the
supervision rules quickly; the real launcher tests check what a user sees: READY, logs, a clean
stop that leaves no process, children that follow a SIGKILLed launcher, bookie ports kept across
restarts, and a produce/consume round trip through the CLI verbs.
"""

from __future__ import annotations

import asyncio
import fcntl
import importlib.util
import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import termios
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from minipulsar.cli.standalone import bookie_metadata_url
from minipulsar.cli.supervisor import Child, ChildFailedError, Supervisor
from minipulsar.metadata import open_metadata_store
from tests.support.cli import run_cli
from tests.support.process import ServerProcess, started, wait_for
from tests.support.servers import metastore_process
from tests.support.zookeeper import ZooKeeperEnsemble, skip_unless_zookeeper

GONE_TIMEOUT_S = 20.0

FAKE_SERVER = textwrap.dedent("""
    import signal, sys
    role, mode, record = sys.argv[1], sys.argv[2], sys.argv[3]
    print(f"{role} starting in mode {mode}", file=sys.stderr, flush=True)
    if mode == "fail":
        print(f"{role}: cannot open data dir", file=sys.stderr, flush=True)
        sys.exit(3)
    def on_term(signum, frame):
        with open(record, "a") as f:
            f.write(role + "\\n")
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term if mode != "stubborn" else signal.SIG_IGN)
    if mode != "silent":
        print(f"READY {role} 127.0.0.1:9", flush=True)  # a fake address: nothing listens
    while True:
        signal.pause()
""")


# ---------------------------------------------------------------------------------------------
# Helpers: processes by pid, without psutil.


def children_of(pid: int) -> list[int]:
    """Live child pids of ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            state, parent = _state_and_parent(int(entry.name))
            if parent == pid and state not in ("gone", "Z"):
                found.append(int(entry.name))
    return found


def _state_and_parent(pid: int) -> tuple[str, int | None]:
    """(state letter, parent pid) from /proc/PID/stat; ("gone", None) once it has been reaped."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ("gone", None)
    fields = text[text.rindex(")") + 2 :].split()  # after "(comm)", which may hold spaces
    return (fields[0], int(fields[1]))


def is_gone(pid: int) -> bool:
    """Exited (a zombie nobody reaped yet counts: it runs no code and holds no port)."""
    return _state_and_parent(pid)[0] in ("gone", "Z")


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ").strip()
    except OSError:
        return f"(pid {pid} gone)"


def kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        if not is_gone(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# ---------------------------------------------------------------------------------------------
# The supervisor, on fake servers.


@pytest.fixture
def fake(tmp_path: Path) -> Callable[..., Child]:
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)

    def make(name: str, role: str, mode: str = "ok") -> Child:
        return Child(
            name,
            role,
            [mode, str(tmp_path / "stopped.txt")],
            tmp_path / "logs" / f"{name}.log",
            program=[sys.executable, str(script)],
        )

    return make


@pytest_asyncio.fixture
async def supervisor() -> AsyncIterator[Supervisor]:
    sup = Supervisor()
    try:
        yield sup
    finally:
        sup.kill_all()
        await sup.stop_all(timeout_s=1)


async def test_supervisor_stops_broker_then_bookies_then_metastore(
    supervisor: Supervisor, fake: Callable[..., Child], tmp_path: Path
) -> None:
    for name in ("metastore", "bookie-0", "bookie-1", "broker"):
        await supervisor.start(fake(name, name.split("-")[0]))
    assert await supervisor.stop_all()
    order = (tmp_path / "stopped.txt").read_text().split()
    assert order[0] == "broker" and sorted(order[1:3]) == ["bookie", "bookie"] and order[3] == "metastore"


async def test_child_exiting_before_ready_fails_naming_it_with_its_log_tail(
    supervisor: Supervisor, fake: Callable[..., Child]
) -> None:
    with pytest.raises(ChildFailedError) as failure:
        await supervisor.start(fake("bookie-0", "bookie", "fail"))
    message = str(failure.value)
    assert "bookie-0 ended (exit code 3) before it was ready" in message
    assert "bookie: cannot open data dir" in message


async def test_child_silent_past_its_deadline_fails_and_is_stopped(
    supervisor: Supervisor, fake: Callable[..., Child]
) -> None:
    child = fake("broker", "broker", "silent")
    with pytest.raises(ChildFailedError, match=r"broker was not ready within 0\.5s"):
        await supervisor.start(child, ready_timeout_s=0.5)
    await supervisor.stop_all()
    assert child.returncode == 0


async def test_child_ignoring_sigterm_is_killed_after_the_stop_deadline(
    supervisor: Supervisor, fake: Callable[..., Child]
) -> None:
    child = fake("metastore", "metastore", "stubborn")
    await supervisor.start(child)
    assert not await supervisor.stop_all(timeout_s=0.5)
    assert child.returncode == -signal.SIGKILL


async def test_child_in_its_own_process_group_leads_it(
    supervisor: Supervisor, fake: Callable[..., Child], tmp_path: Path
) -> None:
    """Goal: with a terminal attached, Ctrl-C (SIGINT to the foreground group) must not reach children."""
    child = Child(
        "broker",
        "broker",
        ["ok", str(tmp_path / "stopped.txt")],
        tmp_path / "broker.log",
        program=fake("x", "x").program,
        own_process_group=True,
    )
    await supervisor.start(child)
    assert os.getpgid(child.pid) == child.pid != os.getpgid(0)


async def test_first_exit_reports_the_child_that_died(supervisor: Supervisor, fake: Callable[..., Child]) -> None:
    await supervisor.start(fake("metastore", "metastore"))
    victim = fake("bookie-0", "bookie")
    await supervisor.start(victim)
    os.kill(victim.pid, signal.SIGKILL)
    assert await asyncio.wait_for(supervisor.first_exit(), 10) is victim


# ---------------------------------------------------------------------------------------------
# The real launcher.

ANY_PORTS = [
    "--broker-port",
    "0",
    "--web-port",
    "0",
    "--metastore-port",
    "0",
    "--metastore-http-port",
    "0",
    "--bookie-port",
    "0",
    "--bookie-http-port",
    "0",
]


def without_flags(argv: list[str], *flags: str) -> list[str]:
    """``argv`` without each of ``flags`` and its value."""
    for flag in flags:
        at = argv.index(flag)
        argv = argv[:at] + argv[at + 2 :]
    return argv


class Standalone:
    """Launchers started by one test; children found by pid and killed if anything is left."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path, self.data_dir = tmp_path, tmp_path / "data"
        self.launchers: list[ServerProcess] = []
        self.child_pids: list[int] = []

    async def start(self, *extra: str, metastore: bool = True) -> ServerProcess:
        """``metastore=False``: no metastore ports (``extra`` names an external store)."""
        ports = ANY_PORTS if metastore else without_flags(ANY_PORTS, "--metastore-port", "--metastore-http-port")
        launcher = ServerProcess(
            "standalone",
            ["--data-dir", str(self.data_dir), "--bookies", "1", *ports, *extra],
            self.tmp_path / f"launcher-{len(self.launchers)}.log",
        )
        self.launchers.append(launcher)
        await asyncio.to_thread(launcher.start, 60)
        self.child_pids += children_of(launcher.proc.pid)
        return launcher

    def log_tails(self, lines: int = 8) -> str:
        tails = []
        for log in sorted((self.data_dir / "logs").glob("*.log")):
            tails.append(f"--- {log.name} ---\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(tails)

    def saved_bookie_ports(self) -> dict[str, int]:
        return json.loads((self.data_dir / "standalone.json").read_text())["bookie_ports"]

    async def close(self) -> None:
        for launcher in self.launchers:
            await asyncio.to_thread(launcher.stop)
        kill_leftovers(self.child_pids)


@pytest_asyncio.fixture
async def standalone(tmp_path: Path) -> AsyncIterator[Standalone]:
    cluster = Standalone(tmp_path)
    try:
        yield cluster
    finally:
        await cluster.close()


async def test_standalone_runs_each_server_as_a_child_with_its_own_log(standalone: Standalone) -> None:
    launcher = await standalone.start()
    children = children_of(launcher.proc.pid)
    assert len(children) == 3, children  # metastore, bookie-0, broker
    assert all(not is_gone(pid) for pid in children)
    for name in ("metastore", "bookie-0", "broker"):
        assert (standalone.data_dir / "logs" / f"{name}.log").stat().st_size > 0
    assert (standalone.data_dir / "journal" / "bookie-0").is_dir()
    assert (standalone.data_dir / "ledgers" / "bookie-0").is_dir()
    with socket.create_connection((launcher.host, launcher.port), timeout=5):
        pass  # the announced broker address serves


async def test_sigterm_stops_every_child_and_exits_zero(standalone: Standalone) -> None:
    launcher = await standalone.start()
    children = children_of(launcher.proc.pid)
    assert await asyncio.to_thread(launcher.stop, 60) == 0
    assert [pid for pid in children if not is_gone(pid)] == []


async def test_sigkilled_launcher_takes_its_children_down(standalone: Standalone) -> None:
    """Goal: no server outlives a launcher killed without warning.
    Method: SIGKILL the launcher alone (not its group); PR_SET_PDEATHSIG must SIGTERM the children."""
    launcher = await standalone.start()
    children = children_of(launcher.proc.pid)
    os.kill(launcher.proc.pid, signal.SIGKILL)
    await asyncio.to_thread(launcher.proc.wait, 10)
    try:
        await wait_for(lambda: all(is_gone(pid) for pid in children), GONE_TIMEOUT_S)
    except AssertionError:
        alive = [command_line(pid) for pid in children if not is_gone(pid)]
        pytest.fail(
            f"{GONE_TIMEOUT_S:g}s after the launcher's death these still run: {alive}\n" + standalone.log_tails()
        )


async def test_killing_the_launchers_process_group_kills_the_whole_cluster(standalone: Standalone) -> None:
    """Goal: without a terminal, children share the launcher's process group, so one killpg (what
    ServerProcess.kill and process managers do) crashes the whole cluster at once, as a crash test wants."""
    launcher = await standalone.start()
    children = children_of(launcher.proc.pid)
    assert {os.getpgid(pid) for pid in children} == {launcher.proc.pid}
    await asyncio.to_thread(launcher.kill)
    await wait_for(lambda: all(is_gone(pid) for pid in children), 5, message="killpg left children running")


async def test_restart_on_the_same_data_dir_reuses_the_bookie_port(standalone: Standalone) -> None:
    first = await standalone.start()
    port = standalone.saved_bookie_ports()["bookie-0"]
    assert await asyncio.to_thread(first.stop, 60) == 0
    await standalone.start()  # again with --bookie-port 0: "any port" must keep the saved one
    assert standalone.saved_bookie_ports() == {"bookie-0": port}
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


def run_in_terminal_until_ctrl_c(argv: list[str], ready_timeout_s: float = 60) -> tuple[int, str, dict[int, int]]:
    """Run ``argv`` on a pseudo-terminal as its foreground job, press Ctrl-C once it is READY.
    Returns (exit code, everything it printed, {child pid: its process group} before Ctrl-C)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),  # noqa: PLW1509 -- the child needs a controlling terminal
    )
    os.close(slave)
    output, groups = b"", {}
    deadline = time.monotonic() + ready_timeout_s
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([master], [], [], 1)
            try:
                chunk = os.read(master, 65536) if readable else b""
            except OSError:  # EIO: every process holding the terminal has exited
                break
            output += chunk
            if not groups and b"READY standalone" in output:
                groups = {pid: os.getpgid(pid) for pid in children_of(proc.pid)}
                os.write(master, b"\x03")  # the terminal turns it into SIGINT for its foreground group
        return proc.wait(30), output.decode(errors="replace"), groups
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


async def test_ctrl_c_in_a_terminal_stops_broker_then_bookies_then_metastore(tmp_path: Path) -> None:
    """Goal: a person's Ctrl-C stops the cluster in dependency order and exits 0.
    Method: run the launcher on a pseudo-terminal; the terminal delivers SIGINT to its foreground
    group, which must hold the launcher only; read the order of its "stopped" lines."""
    argv = [sys.executable, "-m", "minipulsar", "standalone", "--data-dir", str(tmp_path / "data"), *ANY_PORTS]
    code, output, groups = await asyncio.to_thread(run_in_terminal_until_ctrl_c, argv)
    assert len(groups) == 3 and all(pid == group for pid, group in groups.items()), groups
    stopped = [
        line.split(": ")[-1]
        for line in output.splitlines()
        if line.endswith(" stopped") and "minipulsar.standalone" in line
    ]
    assert code == 0, output
    assert stopped == ["broker stopped", "bookie-0 stopped", "metastore stopped", "standalone stopped"], output


async def test_bookie_port_in_use_is_a_clear_error(standalone: Standalone, tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        args = ["--data-dir", str(tmp_path / "busy"), *ANY_PORTS, "--bookie-port", str(port)]
        result = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "minipulsar", "standalone", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 2
    assert f"bookie-0 port 127.0.0.1:{port} is in use" in result.stderr


@pytest.mark.expect_error_log(r"ended unexpectedly")
async def test_a_dying_child_stops_the_cluster_with_a_failure_exit(standalone: Standalone) -> None:
    launcher = await standalone.start()
    children = children_of(launcher.proc.pid)
    bookie = next(pid for pid in children if " bookie " in command_line(pid))
    os.kill(bookie, signal.SIGKILL)
    assert await asyncio.to_thread(launcher.proc.wait, 60) == 1
    assert [pid for pid in children if not is_gone(pid)] == []
    assert "bookie-0" in launcher.log_tail() and "ended unexpectedly" in launcher.log_tail()


@pytest.mark.skipif(
    importlib.util.find_spec("minipulsar.cli.client_verbs") is None,
    reason="the produce/consume verbs are not built yet",
)
async def test_produce_then_consume_ten_messages_with_the_cli_verbs(standalone: Standalone) -> None:
    launcher = await standalone.start()
    url = f"pulsar://{launcher.address}"

    async def verb(*args: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "minipulsar", *args, "--service-url", url]
        return await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=60)

    produced = await verb("produce", "my-topic", "-m", "hello", "-n", "10")
    assert produced.returncode == 0, produced.stderr
    consumed = await verb("consume", "my-topic", "-s", "sub", "-n", "10")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.count("hello") == 10, consumed.stdout


# ---------------------------------------------------------------------------------------------
# --metadata-url: the cluster on a metadata store it did not start.


@pytest_asyncio.fixture(params=["metastore", "zookeeper"])
async def external_metadata_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of a metadata store running on its own: a metastore process, or a ZooKeeper server
    (Pulsar's URL with a chroot, so the bookies' URL carries one too)."""
    if request.param == "metastore":
        metastore = metastore_process(tmp_path / "external")
        async with started(metastore):
            yield metastore.url
        return
    skip_unless_zookeeper()
    zookeeper = ZooKeeperEnsemble(tmp_path / "zookeeper", nodes=1)
    try:
        await asyncio.to_thread(zookeeper.start)
        yield f"{zookeeper.url}/standalone"
    finally:
        await asyncio.to_thread(zookeeper.stop)


async def test_metadata_url_puts_the_cluster_on_an_external_store_and_starts_no_metastore(
    standalone: Standalone, external_metadata_url: str
) -> None:
    """Goal: with --metadata-url the launcher starts bookies and a broker only, registered in that
    store, serving a produce/consume round trip; the data dir is then bound to that store.
    Method: start the store on its own, the launcher on it; read the registrations from the store;
    stop the launcher (the store keeps running) and ask for its own metastore on the same data dir."""
    launcher = await standalone.start("--metadata-url", external_metadata_url, metastore=False)
    children = {
        command_line(pid).split(" -m minipulsar ")[1].split()[0]: command_line(pid)
        for pid in children_of(launcher.proc.pid)
    }
    assert sorted(children) == ["bookie", "broker"]
    assert f"--metadata-url {bookie_metadata_url(external_metadata_url)} " in children["bookie"]
    assert f"--metadata-url {external_metadata_url} " in children["broker"]
    assert not (standalone.data_dir / "metastore").exists()

    service_url = ("--service-url", f"pulsar://{launcher.address}")
    produced = await asyncio.to_thread(run_cli, "produce", "ext-topic", "-m", "hello", "-n", "10", *service_url)
    assert produced.returncode == 0, produced.stderr
    consumed = await asyncio.to_thread(run_cli, "consume", "ext-topic", "-s", "sub", "-n", "10", *service_url)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.count("hello") == 10, consumed.stdout

    bookie_id = f"127.0.0.1:{standalone.saved_bookie_ports()['bookie-0']}"
    store = await open_metadata_store(external_metadata_url)
    try:
        assert bookie_id in await store.children("/ledgers/available")
        assert len(await store.children("/loadbalance/brokers")) == 1
    finally:
        await store.close()
    saved = json.loads((standalone.data_dir / "standalone.json").read_text())
    assert saved["metadata_url"] == external_metadata_url

    assert await asyncio.to_thread(launcher.stop, 60) == 0
    own_metastore = await asyncio.to_thread(run_cli, "standalone", "--data-dir", str(standalone.data_dir), *ANY_PORTS)
    assert own_metastore.returncode == 2
    assert f"holds bookies registered in --metadata-url {external_metadata_url}" in own_metastore.stderr
