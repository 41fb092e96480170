"""The repository's compose files brought up with a real Docker engine, for tests.

:func:`docker_unavailable_reason` says why nothing can run here (no client, no daemon, a base
image neither present nor pullable), for a visible skip. :func:`build_images` builds the images
the files name (``minipulsar:local``, ``minipulsar-zookeeper:local``) from this tree with the
host's network, as a machine whose Docker bridge has no route out needs. A
:class:`ComposeProject` runs one file under a project name of its own, with every disk
variable pointed into the test's temp dir, and is always taken down (``down -v``).

One change to the file: the brokers' ports. The files publish the well-known 6650/8080 and
6651/8081 on every interface of the host, which a test must not take; the project's copy moves
each broker to free ports (:func:`publish_on_free_ports`: what the broker listens on, what it
advertises, its health check, and what broker-network publishes, now on 127.0.0.1 only), so
that clients on the host reach both brokers as a user's would, at the ``localhost`` addresses
the brokers advertise and their lookups answer with. tests/unit/test_compose.py checks the
file's own ports.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import yaml

from tests.support.net import free_ports
from tests.support.process import ERROR_LINE

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILES = {"metastore": ROOT / "docker-compose.yml", "zookeeper": ROOT / "docker-compose.zookeeper.yml"}
"""Variant (where its metadata lives) → compose file."""
BASE_IMAGES = {"BASE_IMAGE": "python:3.11-slim", "ZOOKEEPER_BASE_IMAGE": "debian:bookworm-slim"}
"""The files' base-image variables and their defaults; the environment may name local stand-ins."""
IMAGES = {
    "minipulsar:local": (ROOT / "docker" / "Dockerfile", ROOT, "BASE_IMAGE"),
    "minipulsar-zookeeper:local": (
        ROOT / "docker" / "zookeeper" / "Dockerfile",
        ROOT / "docker" / "zookeeper",
        "ZOOKEEPER_BASE_IMAGE",
    ),
}
"""Tag → (Dockerfile, context, the variable naming its base image: the Dockerfile's ``BASE_IMAGE``)."""
BUILD_TIMEOUT_S = 900.0
"""A cold build installs a JRE and every Python dependency over the network."""
COMMAND_TIMEOUT_S = 300.0
_LOG_PREFIX = re.compile(r"^\S+\s+\|\s?")
"""``docker compose logs``'s ``service_1  | `` before each line."""


def _flag_value(command: list[str], flag: str) -> int:
    return int(command[command.index(flag) + 1])


def publish_on_free_ports(services: dict[str, dict]) -> dict[str, tuple[int, int]]:
    """Move every broker service of a compose document to free ports, in place; returns broker
    service → (client port, web port). A broker's container ports are its host ports (it
    advertises them), so its flags, its health check and the published ports change together."""
    brokers = {name: s for name, s in services.items() if [str(a) for a in s.get("command", [])][:1] == ["broker"]}
    fresh = iter(free_ports(2 * len(brokers)))
    moved: dict[int, int] = {}
    ports: dict[str, tuple[int, int]] = {}
    for name, service in brokers.items():
        command = [str(arg) for arg in service["command"]]
        old_port, old_http_port = _flag_value(command, "--port"), _flag_value(command, "--http-port")
        ports[name] = port, http_port = next(fresh), next(fresh)
        command[command.index("--port") + 1], command[command.index("--http-port") + 1] = str(port), str(http_port)
        service["command"] = command
        moved |= {old_port: port, old_http_port: http_port}
        probe = [str(part).replace(f":{old_http_port}/", f":{http_port}/") for part in service["healthcheck"]["test"]]
        service["healthcheck"]["test"] = probe
    for service in services.values():
        if "ports" in service and not service.get("profiles"):  # a profile's are not brought up
            targets = [int(str(spec).rsplit(":", 1)[1]) for spec in service["ports"]]
            assert set(targets) <= set(moved), f"a published port that is no broker's: {service['ports']}"
            service["ports"] = [f"127.0.0.1:{moved[port]}:{moved[port]}" for port in targets]
    return ports


def _docker(
    argv: list[str], timeout_s: float = COMMAND_TIMEOUT_S, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env, stdin=subprocess.DEVNULL)


def compose_command() -> list[str] | None:
    """``docker compose`` (v2) or ``docker-compose`` (v1, Debian bookworm's), whichever works."""
    if shutil.which("docker") and _docker(["docker", "compose", "version"]).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose") and _docker(["docker-compose", "version"]).returncode == 0:
        return ["docker-compose"]
    return None


def base_image(variable: str) -> str:
    return os.environ.get(variable) or BASE_IMAGES[variable]


def docker_unavailable_reason() -> str | None:
    """Why the compose files cannot be brought up here, or None."""
    if not shutil.which("docker"):
        return "Docker: no docker client on PATH"
    if compose_command() is None:
        return "Docker: neither `docker compose` nor `docker-compose` works"
    info = _docker(["docker", "info", "--format", "{{.ServerVersion}}"], 60)
    if info.returncode != 0:
        return f"Docker: the daemon does not answer ({(info.stderr.strip().splitlines() or ['no output'])[-1]})"
    for variable in BASE_IMAGES:
        image = base_image(variable)
        if (
            _docker(["docker", "image", "inspect", image], 60).returncode != 0
            and _docker(["docker", "pull", image]).returncode != 0
        ):
            return (
                f"Docker: base image {image} is neither present nor pullable "
                f"(set {variable} to a local Debian bookworm image)"
            )
    return None


def build_images() -> None:
    """Build both images from this tree (layers cached: seconds after the first build)."""
    for tag, (dockerfile, context, variable) in IMAGES.items():
        argv = ["docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base_image(variable)}"]
        result = _docker([*argv, "-f", str(dockerfile), "-t", tag, str(context)], BUILD_TIMEOUT_S)
        assert result.returncode == 0, f"docker build {tag} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


class ComposeProject:
    """One compose file up under a project name of its own, its data in ``root``."""

    def __init__(self, variant: str, root: Path) -> None:
        command = compose_command()
        assert command is not None
        self.root, self.name = root, f"minipulsar-test-{uuid.uuid4().hex[:8]}"
        document = yaml.safe_load(COMPOSE_FILES[variant].read_text())
        self.services: dict[str, dict] = document["services"]
        self.broker_ports = publish_on_free_ports(self.services)
        """Broker service → (client port, web port), on the host and in its container alike."""
        self.file = root / "compose.yml"
        self.file.write_text(yaml.safe_dump(document))
        self.env = {
            **os.environ,
            **{variable: base_image(variable) for variable in BASE_IMAGES},
            **{
                disk: str(root / disk.lower())
                for disk in ("JOURNAL_DISK", "LEDGER_DISK", "METASTORE_DISK", "ZOOKEEPER_DISK")
            },
        }
        self.env.pop("BROKER_ADVERTISED_ADDRESS", None)  # the file's default: localhost
        self._compose = [*command, "-p", self.name, "-f", str(self.file), "--project-directory", str(ROOT)]

    @property
    def brokers(self) -> list[str]:
        """The broker services, in the file's order."""
        return list(self.broker_ports)

    def service_url(self, broker: str) -> str:
        """``pulsar://localhost:port``: the broker's client port from the host, as it advertises it."""
        return f"pulsar://localhost:{self.broker_ports[broker][0]}"

    def web_url(self, broker: str) -> str:
        """``http://localhost:port``: the broker's admin, HTTP lookup and /metrics from the host."""
        return f"http://localhost:{self.broker_ports[broker][1]}"

    def broker_id(self, broker: str) -> str:
        """The broker's id in the cluster (``host:webport``, advertised)."""
        return f"localhost:{self.broker_ports[broker][1]}"

    def bookie_metadata_urls(self) -> set[str]:
        """The ``--metadata-url`` of every bookie service."""
        urls = set()
        for service in self.services.values():
            command = [str(arg) for arg in service.get("command", [])]
            if command[:1] == ["bookie"]:
                urls.add(command[command.index("--metadata-url") + 1])
        return urls

    def compose(self, *args: str, timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return _docker([*self._compose, *args], timeout_s, self.env)

    def up(self) -> None:
        """Start every service; returns once those others depend on are healthy."""
        result = self.compose("up", "-d", "--no-build")
        assert result.returncode == 0, f"compose up failed:\n{result.stderr[-3000:]}"

    def minipulsar(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``minipulsar ARGS`` in the first broker's container, for what only the project's
        network reaches (the metadata store). In a running container rather than one of its own:
        a new container may take the address of one just killed, which would then refuse
        connections instead of swallowing them."""
        return self.compose("exec", "-T", self.brokers[0], "minipulsar", *args)

    def zookeeper_mode(self, service: str) -> str | None:
        """What ``srvr`` says of ZooKeeper node ``service``: ``leader``, ``follower``, ``standalone``,
        or None when it does not serve."""
        probe = "exec 3<>/dev/tcp/127.0.0.1/2181 && printf srvr >&3 && cat <&3"
        result = self.compose("exec", "-T", service, "bash", "-c", probe, timeout_s=60)
        modes = [
            line.removeprefix("Mode: ").strip() for line in result.stdout.splitlines() if line.startswith("Mode: ")
        ]
        return modes[0] if modes else None

    def logs(self, service: str | None = None) -> list[str]:
        """Every line the services logged, without compose's ``name |`` prefix."""
        result = self.compose("logs", "--no-color", *([service] if service else []))
        return [_LOG_PREFIX.sub("", line, count=1) for line in result.stdout.splitlines()]

    def error_lines(self) -> list[str]:
        """The ERROR lines a project logger wrote in any container."""
        return [line for line in self.logs() if ERROR_LINE.match(line)]

    def down(self) -> None:
        self.compose("down", "-v", "--timeout", "30")
