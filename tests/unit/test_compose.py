"""The compose files, checked without Docker: docker-compose.yml (on the metastore) and
docker-compose.zookeeper.yml (on a ZooKeeper ensemble). In both, every minipulsar command is a
valid ``minipulsar`` invocation, and addresses, volumes, ports and health checks agree with the
flags the servers are started with; the two brokers share broker-network's network namespace,
which publishes each one's ports; the ZooKeeper nodes form one ensemble the URLs name, and the
two files run the same bookies and brokers but for their metadata URL. docker-compose.yml's
``monitoring`` profile adds Prometheus and Grafana, whose configuration files are in the
repository and whose scrape targets are the servers' /metrics ports."""

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
BROKER_NETWORK = "broker-network"
"""The service holding the brokers' network namespace and publishing their ports."""
MONITORING_MOUNTS = {
    "prometheus": {"./docker/prometheus/prometheus.yml": "/etc/prometheus/prometheus.yml:ro"},
    "grafana": {
        "./docker/grafana/provisioning": "/etc/grafana/provisioning:ro",
        "./docker/grafana/dashboards": "/var/lib/grafana/dashboards:ro",
    },
}
"""The monitoring profile's services → their mounts (host path in the repository → container path)."""
SCRAPE_JOBS = {"broker": "broker", "bookie": "bookie", "metastore": "metastore"}
"""Prometheus job name → the role of the servers it scrapes."""

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
    """A minipulsar server: the image, running a minipulsar command."""
    return service.get("build", {}).get("dockerfile") == MINIPULSAR_DOCKERFILE and "command" in service


def default_profile(services: dict[str, dict]) -> dict[str, dict]:
    """The services ``docker compose up`` starts (those of no profile)."""
    return {name: s for name, s in services.items() if not s.get("profiles")}


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


def test_cluster_is_its_metadata_store_three_bookies_and_two_brokers(
    variant: str, services: dict[str, dict], parsed: dict[str, argparse.Namespace]
) -> None:
    metastores, nodes = by_role(parsed, "metastore"), zookeeper_nodes(services)
    assert (len(metastores), len(nodes)) == ((1, 0) if variant == "metastore" else (0, 3))
    assert len(by_role(parsed, "bookie")) == 3
    assert sorted(by_role(parsed, "broker")) == ["broker-1", "broker-2"]
    assert len(default_profile(services)) == len(parsed) + len(nodes) + 1 == (7 if variant == "metastore" else 9)


def test_every_service_runs_the_image_with_a_minipulsar_command_or_is_a_zookeeper_node(
    services: dict[str, dict],
) -> None:
    for name, service in default_profile(services).items():
        if is_minipulsar(service):
            assert isinstance(service["command"], list), f"{name}: use the exec form (a list)"
        elif name != BROKER_NETWORK:
            assert name in zookeeper_nodes(services), f"{name}: neither minipulsar nor a ZooKeeper node"
            assert "command" not in service, f"{name}: the image's entrypoint starts ZooKeeper"


def test_broker_network_only_holds_a_network_namespace(services: dict[str, dict]) -> None:
    """Goal: the namespace's holder never exits nor restarts on its own (the brokers would lose
    their network), and stops at once on SIGTERM (init: sleep as PID 1 would ignore it)."""
    holder = services[BROKER_NETWORK]
    assert holder["entrypoint"] == ["sleep", "infinity"] and holder["init"] is True
    assert "network_mode" not in holder


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


def test_brokers_advertise_localhost_unless_told_otherwise(services: dict[str, dict]) -> None:
    for name, service in services.items():
        if is_minipulsar(service) and service["command"][0] == "broker":
            assert parse_command(name, service).advertised_address == "localhost"
            told = parse_command(name, service, {"BROKER_ADVERTISED_ADDRESS": "pulsar.example.com"})
            assert told.advertised_address == "pulsar.example.com"


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


def published(service: dict) -> set[tuple[int, int]]:
    """(host port, container port) of every port the service publishes."""
    pairs = (str(spec).rsplit(":", 2)[-2:] for spec in service.get("ports", []))
    return {(int(host), int(container)) for host, container in pairs}


def test_brokers_share_broker_networks_namespace_which_publishes_each_ones_ports(
    services: dict[str, dict], parsed: dict[str, argparse.Namespace]
) -> None:
    """Goal: the host reaches each broker at the ports it advertises (lookups redirect there),
    and the brokers reach each other at the same addresses (one network namespace)."""
    brokers = by_role(parsed, "broker")
    for name in brokers:
        assert services[name]["network_mode"] == f"service:{BROKER_NETWORK}", name
        assert "ports" not in services[name], f"{name}: publish on {BROKER_NETWORK}"
    expected = {(port, port) for args in brokers.values() for port in (args.port, args.http_port)}
    assert published(services[BROKER_NETWORK]) == expected
    assert len(expected) == 2 * len(brokers)  # no two brokers on one port of the namespace
    assert {name: (args.port, args.http_port) for name, args in brokers.items()} == {
        "broker-1": (6650, 8080),
        "broker-2": (6651, 8081),
    }


def test_broker_network_answers_to_every_brokers_name(
    services: dict[str, dict], parsed: dict[str, argparse.Namespace]
) -> None:
    """Goal: in the project's network, ``broker-N:<its web port>`` reaches broker N (Prometheus)."""
    aliases = services[BROKER_NETWORK]["networks"]["default"]["aliases"]
    assert sorted(aliases) == sorted(by_role(parsed, "broker"))


def test_broker_quorum_fits_the_bookies(parsed: dict[str, argparse.Namespace]) -> None:
    for broker in by_role(parsed, "broker").values():
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


def test_bookies_wait_for_the_metadata_and_the_brokers_for_it_and_every_bookie(
    services: dict[str, dict], parsed: dict[str, argparse.Namespace]
) -> None:
    stores = set(metadata_services(services, parsed))
    for name in by_role(parsed, "bookie"):
        needs = services[name]["depends_on"]
        assert set(needs) == stores, name
        assert {need["condition"] for need in needs.values()} == {"service_healthy"}, name
    for name in by_role(parsed, "broker"):
        needs = dict(services[name]["depends_on"])
        assert needs.pop(BROKER_NETWORK) == {"condition": "service_started"}  # it has nothing to check
        assert set(needs) == set(by_role(parsed, "bookie")) | stores, name
        assert {need["condition"] for need in needs.values()} == {"service_healthy"}, name


def test_dockerfile_copies_every_package_it_installs() -> None:
    dockerfile = (ROOT / MINIPULSAR_DOCKERFILE).read_text()
    copied = set(re.findall(r"^COPY (\w+) ", dockerfile, re.MULTILINE))
    assert copied >= {"minipulsar", "bookie", "broker", "client"}
    assert 'ENTRYPOINT ["minipulsar"]' in dockerfile


READINESS_PATHS = {"bookie": "/api/v1/bookie/is_ready", "broker": "/admin/v2/brokers/health"}
"""The HTTP readiness endpoint each role's health check reads: 200 only while it serves."""


def test_healthchecks_probe_the_ports_the_servers_listen_on(
    services: dict[str, dict], parsed: dict[str, argparse.Namespace]
) -> None:
    for name, args in by_role(parsed, "metastore").items():
        probe = " ".join(services[name]["healthcheck"]["test"])
        assert re.search(rf"127\.0\.0\.1'?, ?{args.port}\b", probe), (name, probe)
    for role, path in READINESS_PATHS.items():
        for name, args in by_role(parsed, role).items():
            probe = " ".join(services[name]["healthcheck"]["test"])
            assert f"urlopen('http://127.0.0.1:{args.http_port}{path}'" in probe, (name, probe)
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


def test_both_files_run_the_same_bookies_and_brokers_but_for_the_metadata_url() -> None:
    """Goal: the ZooKeeper variant does not drift from the default cluster."""
    default, zookeeper = load_services("metastore"), load_services("zookeeper")
    assert zookeeper[BROKER_NETWORK] == default[BROKER_NETWORK]
    for name, service in zookeeper.items():
        if not is_minipulsar(service):
            continue
        theirs, ours = vars(parse_command(name, default[name])), vars(parse_command(name, service))
        theirs.pop("metadata_url"), ours.pop("metadata_url")
        assert ours == theirs, name
        for key in ("volumes", "ports", "healthcheck", "build", "image", "stop_grace_period", "network_mode"):
            assert service.get(key) == default[name].get(key), (name, key)


def test_both_builders_leave_the_venv_data_and_caches_out_of_the_context() -> None:
    """BuildKit reads docker/Dockerfile.dockerignore; the legacy builder (docker-compose v1) only
    the context's .dockerignore, which must be the same file."""
    ignored = (ROOT / "docker" / "Dockerfile.dockerignore").read_text().split()
    assert {".venv", "data", ".mypy_cache"} <= set(ignored)
    assert (ROOT / ".dockerignore").resolve() == (ROOT / "docker" / "Dockerfile.dockerignore").resolve()


# ---------------------------------------------------------------------------------------------
# docker-compose.yml's monitoring profile.


def test_monitoring_profile_adds_prometheus_and_grafana_on_pinned_images() -> None:
    services = load_services("metastore")
    profiled = {name for name, s in services.items() if s.get("profiles")}
    assert profiled == set(MONITORING_MOUNTS)
    for name in MONITORING_MOUNTS:
        assert services[name]["profiles"] == ["monitoring"], name
        _, tag = services[name]["image"].rsplit(":", 1)
        assert re.fullmatch(r"v?\d+\.\d+\.\d+", tag), f"{name}: pin a release, not {tag!r}"
    assert published(services["prometheus"]) == {(9090, 9090)}
    assert published(services["grafana"]) == {(3000, 3000)}


def test_monitoring_mounts_are_files_of_the_repository_read_only() -> None:
    services = load_services("metastore")
    for name, mounts in MONITORING_MOUNTS.items():
        assert dict(str(v).split(":", 1) for v in services[name]["volumes"]) == mounts, name
        for source in mounts:
            assert (ROOT / source).exists(), f"{name} mounts {source}, which is not in the repository"


def test_grafana_lets_anonymous_viewers_in_and_takes_its_admin_password_from_the_environment() -> None:
    environment = load_services("metastore")["grafana"]["environment"]
    assert environment["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert environment["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    password = environment["GF_SECURITY_ADMIN_PASSWORD"]
    assert interpolate(password, {"GRAFANA_ADMIN_PASSWORD": "s3cret"}) == "s3cret"
    assert interpolate(password, {}) != ""


def scrape_targets(config: dict) -> dict[str, set[str]]:
    """Prometheus job name → its static targets (``host:port``)."""
    return {
        job["job_name"]: {target for static in job.get("static_configs", []) for target in static["targets"]}
        for job in config["scrape_configs"]
    }


def test_prometheus_scrapes_every_servers_metrics_port_by_its_name_in_the_network() -> None:
    """Goal: docker/prometheus/prometheus.yml and the compose file agree (the brokers by
    broker-network's aliases)."""
    parsed = {name: parse_command(name, s) for name, s in load_services("metastore").items() if is_minipulsar(s)}
    config = yaml.safe_load((ROOT / "docker" / "prometheus" / "prometheus.yml").read_text())
    expected = {
        job: {f"{name}:{args.http_port}" for name, args in by_role(parsed, role).items()}
        for job, role in SCRAPE_JOBS.items()
    }
    assert scrape_targets(config) == expected
