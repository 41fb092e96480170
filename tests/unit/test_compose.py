"""The compose files, checked without Docker: docker-compose.yml (on the metastore) and
docker-compose.zookeeper.yml (on a ZooKeeper ensemble). In both, every minipulsar command is a
valid ``minipulsar`` invocation, and addresses, volumes, ports and health checks agree with the
flags the servers are started with; the ZooKeeper nodes form one ensemble the URLs name, and
the two files run the same bookies and broker but for their metadata URL."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from urllib.parse import urlsplit

import pytest
import yaml

from minipulsar.cli.main import build_parser
from minipulsar.metadata.zk_url import parse_zookeeper_url
from tests.support.docker_compose import COMPOSE_FILES, ROOT

MINIPULSAR_DOCKERFILE = "docker/Dockerfile"
ZOOKEEPER_CONTEXT = "docker/zookeeper"
ZOOKEEPER_CLIENT_PORT = 2181
ZOOKEEPER_DATA_DIR = "/data"
"""``dataDir`` in docker/zookeeper/entrypoint.sh's zoo.cfg."""

_VARIABLE = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")
_SERVER_LINE = re.compile(r"^server\.(\d+)=([\w.-]+):(\d+):(\d+);(\d+)$")
"""ZOO_SERVERS's entries, ZooKeeper's dynamic-config form: server.<id>=<host>:<quorum>:<election>;<client>."""


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR}`` / ``${VAR:-default}`` (the forms these files use)."""
    return _VARIABLE.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), text)


def load_services(variant: str) -> dict[str, dict]:
    return yaml.safe_load(COMPOSE_FILES[variant].read_text())["services"]


def parse_command(name: str, service: dict, env: dict[str, str] | None = None) -> argparse.Namespace:
    argv = [interpolate(str(arg), env or {}) for arg in service["command"]]
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            return build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"service {name}: `minipulsar {' '.join(argv)}` does not parse:\n{stderr.getvalue()}")


def overrides(args: argparse.Namespace) -> dict[str, str]:
    return dict(item.split("=", 1) for item in args.overrides)


def volumes(service: dict) -> dict[str, str]:
    """Container path → host path (raw, variables not expanded)."""
    pairs = [str(v).rsplit(":", 1) for v in service.get("volumes", [])]
    return {target: source for source, target in pairs}


def is_minipulsar(service: dict) -> bool:
    return service.get("build", {}).get("dockerfile") == MINIPULSAR_DOCKERFILE


def zookeeper_nodes(services: dict[str, dict]) -> dict[str, dict]:
    return {name: s for name, s in services.items() if s.get("build", {}).get("context") == ZOOKEEPER_CONTEXT}


@pytest.fixture(scope="module", params=sorted(COMPOSE_FILES))
def variant(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def services(variant: str) -> dict[str, dict]:
    return load_services(variant)


@pytest.fixture(scope="module")
def parsed(services: dict[str, dict]) -> dict[str, argparse.Namespace]:
    """The minipulsar services' command lines, parsed."""
    return {name: parse_command(name, service) for name, service in services.items() if is_minipulsar(service)}


def by_role(parsed: dict[str, argparse.Namespace], role: str) -> dict[str, argparse.Namespace]:
    return {name: args for name, args in parsed.items() if args.command == role}


def metadata_services(services: dict[str, dict], parsed: dict[str, argparse.Namespace]) -> dict[str, int]:
    """The services holding the metadata → the port they serve it on."""
    stores = {name: args.port for name, args in by_role(parsed, "metastore").items()}
    return stores | dict.fromkeys(zookeeper_nodes(services), ZOOKEEPER_CLIENT_PORT)


def url_servers(url: str) -> set[tuple[str, int]]:
    """(host, port) of every server a metadata URL names."""
    if url.startswith("zk"):
        return set(parse_zookeeper_url(url).servers)
    parts = urlsplit(url)
    assert parts.scheme == "metastore" and parts.hostname and parts.port, url
    return {(parts.hostname, parts.port)}


def test_cluster_is_its_metadata_store_three_bookies_and_a_broker(
    variant: str, services: dict[str, dict], parsed: dict[str, argparse.Namespace]
) -> None:
    metastores, nodes = by_role(parsed, "metastore"), zookeeper_nodes(services)
    assert (len(metastores), len(nodes)) == ((1, 0) if variant == "metastore" else (0, 3))
    assert len(by_role(parsed, "bookie")) == 3
    assert len(by_role(parsed, "broker")) == 1
    assert len(services) == len(parsed) + len(nodes) == (5 if variant == "metastore" else 7)


def test_every_service_runs_the_image_with_a_minipulsar_command_or_is_a_zookeeper_node(
    services: dict[str, dict],
) -> None:
    for name, service in services.items():
        if is_minipulsar(service):
            assert isinstance(service["command"], list), f"{name}: use the exec form (a list)"
        else:
            assert name in zookeeper_nodes(services), f"{name}: neither minipulsar nor a ZooKeeper node"
            assert "command" not in service, f"{name}: the image's entrypoint starts ZooKeeper"


def test_metadata_urls_name_every_metadata_service_and_no_other(
    services: dict[str, dict], parsed: dict[str, argparse.Namespace]
) -> None:
    expected = set(metadata_services(services, parsed).items())
    for name, args in parsed.items():
        if args.command in ("bookie", "broker"):
            assert url_servers(args.metadata_url) == expected, name


def test_on_zookeeper_the_broker_uses_pulsars_url_and_bookies_bookkeepers() -> None:
    """Goal: each server gets its project's spelling (metadataStoreUrl, metadataServiceUri), no chroot."""
    parsed = {name: parse_command(name, s) for name, s in load_services("zookeeper").items() if is_minipulsar(s)}
    for name, args in parsed.items():
        scheme = {"broker": "zk:", "bookie": "zk+hierarchical://"}[args.command]
        assert args.metadata_url.startswith(scheme) and not args.metadata_url.startswith("zk://"), name
        assert parse_zookeeper_url(args.metadata_url).chroot == "", name


def test_servers_listen_on_every_interface_of_their_container(parsed: dict[str, argparse.Namespace]) -> None:
    for name, args in parsed.items():
        assert args.bind_address == "0.0.0.0", name


def test_bookies_advertise_their_own_service_name(parsed: dict[str, argparse.Namespace]) -> None:
    for name, args in by_role(parsed, "bookie").items():
        assert args.advertised_address == name


def test_bookie_volumes_come_from_the_disk_variables_one_dir_per_bookie(
    services: dict[str, dict], parsed: dict[str, argparse.Namespace]
) -> None:
    for name, args in by_role(parsed, "bookie").items():
        mounts = volumes(services[name])
        [journal_dir] = args.journal_dir  # --journal-dir is repeatable
        [ledger_dir] = args.ledger_dirs.split(",")
        assert mounts[journal_dir] == f"${{JOURNAL_DISK:-./data/journal-disk}}/{name}"
        assert mounts[ledger_dir] == f"${{LEDGER_DISK:-./data/ledger-disk}}/{name}"


def test_disk_variables_move_journals_and_ledgers_to_other_mounts(services: dict[str, dict]) -> None:
    env = {"JOURNAL_DISK": "/mnt/ssd", "LEDGER_DISK": "/mnt/hdd"}
    bookie = services["bookie-1"]
    sources = sorted(interpolate(source, env) for source in volumes(bookie).values())
    assert sources == ["/mnt/hdd/bookie-1", "/mnt/ssd/bookie-1"]
    assert sorted(interpolate(s, {}) for s in volumes(bookie).values()) == [
        "./data/journal-disk/bookie-1",
        "./data/ledger-disk/bookie-1",
    ]


def test_metadata_is_kept_in_a_volume(services: dict[str, dict], parsed: dict[str, argparse.Namespace]) -> None:
    for name, args in by_role(parsed, "metastore").items():
        assert args.data_dir in volumes(services[name])
    for name, node in zookeeper_nodes(services).items():
        assert volumes(node)[ZOOKEEPER_DATA_DIR] == f"${{ZOOKEEPER_DISK:-./data/zookeeper-disk}}/{name}"


def test_broker_publishes_its_client_and_web_ports(
    services: dict[str, dict], parsed: dict[str, argparse.Namespace]
) -> None:
    [(name, args)] = by_role(parsed, "broker").items()
    published = {tuple(int(p) for p in str(spec).split(":")) for spec in services[name]["ports"]}
    assert published == {(args.port, args.port), (args.http_port, args.http_port)}
    assert (args.port, args.http_port) == (6650, 8080)


def test_broker_quorum_fits_the_bookies(parsed: dict[str, argparse.Namespace]) -> None:
    [broker] = by_role(parsed, "broker").values()
    keys = overrides(broker)
    ensemble, write, ack = (
        int(keys[k])
        for k in (
            "managedLedgerDefaultEnsembleSize",
            "managedLedgerDefaultWriteQuorum",
            "managedLedgerDefaultAckQuorum",
        )
    )
    assert len(by_role(parsed, "bookie")) >= ensemble >= write >= ack >= 1


def test_bookies_wait_for_the_metadata_and_the_broker_for_it_and_every_bookie(
    services: dict[str, dict], parsed: dict[str, argparse.Namespace]
) -> None:
    stores = set(metadata_services(services, parsed))
    for name in by_role(parsed, "bookie"):
        assert set(services[name]["depends_on"]) == stores, name
    [name] = by_role(parsed, "broker")
    assert set(services[name]["depends_on"]) == set(by_role(parsed, "bookie")) | stores
    for needs in (services[name]["depends_on"] for name in by_role(parsed, "bookie") | by_role(parsed, "broker")):
        assert {need["condition"] for need in needs.values()} == {"service_healthy"}


def test_dockerfile_copies_every_package_it_installs() -> None:
    dockerfile = (ROOT / MINIPULSAR_DOCKERFILE).read_text()
    copied = set(re.findall(r"^COPY (\w+) ", dockerfile, re.MULTILINE))
    assert copied >= {"minipulsar", "bookie", "broker", "client"}
    assert 'ENTRYPOINT ["minipulsar"]' in dockerfile


def test_healthchecks_probe_the_ports_the_servers_listen_on(
    services: dict[str, dict], parsed: dict[str, argparse.Namespace]
) -> None:
    for name, args in {**by_role(parsed, "metastore"), **by_role(parsed, "bookie")}.items():
        probe = " ".join(services[name]["healthcheck"]["test"])
        port = args.port if args.command == "metastore" else args.http_port
        assert re.search(rf"127\.0\.0\.1'?[:,] ?{port}\b", probe), (name, probe)
    for name, node in zookeeper_nodes(services).items():
        probe = " ".join(node["healthcheck"]["test"])
        # srvr names a serving mode only in a quorum; ruok answers imok without one.
        assert f"/dev/tcp/127.0.0.1/{ZOOKEEPER_CLIENT_PORT} " in probe and "srvr" in probe, (name, probe)


# ---------------------------------------------------------------------------------------------
# The ZooKeeper variant: one ensemble, and the same cluster as docker-compose.yml.


def test_zookeeper_nodes_form_one_ensemble_of_distinct_ids() -> None:
    nodes = zookeeper_nodes(load_services("zookeeper"))
    [servers] = {node["environment"]["ZOO_SERVERS"] for node in nodes.values()}  # one list for all
    entries = [_SERVER_LINE.match(entry) for entry in servers.split()]
    assert all(entries), servers
    listed = {(int(m[1]), m[2]) for m in entries if m}
    assert listed == {(int(node["environment"]["ZOO_MY_ID"]), name) for name, node in nodes.items()}
    assert {int(m[5]) for m in entries if m} == {ZOOKEEPER_CLIENT_PORT}


def test_zookeeper_image_reads_every_variable_the_compose_file_sets() -> None:
    entrypoint = (ROOT / ZOOKEEPER_CONTEXT / "entrypoint.sh").read_text()
    dockerfile = (ROOT / ZOOKEEPER_CONTEXT / "Dockerfile").read_text()
    assert "COPY entrypoint.sh /usr/local/bin/zookeeper-entrypoint" in dockerfile
    assert 'ENTRYPOINT ["zookeeper-entrypoint"]' in dockerfile
    assert f"dataDir={ZOOKEEPER_DATA_DIR}" in entrypoint and f"clientPort={ZOOKEEPER_CLIENT_PORT}" in entrypoint
    for name, node in zookeeper_nodes(load_services("zookeeper")).items():
        for variable in node["environment"]:
            assert re.search(rf"\${{{variable}\b", entrypoint), f"{name}: entrypoint.sh never reads {variable}"


def test_both_files_run_the_same_bookies_and_broker_but_for_the_metadata_url() -> None:
    """Goal: the ZooKeeper variant does not drift from the default cluster."""
    default, zookeeper = load_services("metastore"), load_services("zookeeper")
    for name, service in zookeeper.items():
        if not is_minipulsar(service):
            continue
        theirs, ours = vars(parse_command(name, default[name])), vars(parse_command(name, service))
        theirs.pop("metadata_url"), ours.pop("metadata_url")
        assert ours == theirs, name
        for key in ("volumes", "ports", "healthcheck", "build", "image", "stop_grace_period"):
            assert service.get(key) == default[name].get(key), (name, key)


def test_both_builders_leave_the_venv_data_and_caches_out_of_the_context() -> None:
    """BuildKit reads docker/Dockerfile.dockerignore; the legacy builder (docker-compose v1) only
    the context's .dockerignore, which must be the same file."""
    ignored = (ROOT / "docker" / "Dockerfile.dockerignore").read_text().split()
    assert {".venv", "data", ".mypy_cache"} <= set(ignored)
    assert (ROOT / ".dockerignore").resolve() == (ROOT / "docker" / "Dockerfile.dockerignore").resolve()
