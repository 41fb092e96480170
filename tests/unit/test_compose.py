"""docker-compose.yml, checked without Docker: every command is a valid ``minipulsar`` invocation,
and addresses, volumes and ports agree with the flags the servers are started with."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from minipulsar.cli.main import build_parser

COMPOSE_PATH = Path(__file__).resolve().parents[2] / "docker-compose.yml"

_VARIABLE = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR}`` / ``${VAR:-default}`` (the forms this file uses)."""
    return _VARIABLE.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), text)


def load_services() -> dict[str, dict]:
    return yaml.safe_load(COMPOSE_PATH.read_text())["services"]


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


@pytest.fixture(scope="module")
def parsed() -> dict[str, argparse.Namespace]:
    return {name: parse_command(name, service) for name, service in load_services().items()}


def by_role(parsed: dict[str, argparse.Namespace], role: str) -> dict[str, argparse.Namespace]:
    return {name: args for name, args in parsed.items() if args.command == role}


def test_cluster_is_a_metastore_three_bookies_and_a_broker(parsed: dict[str, argparse.Namespace]) -> None:
    assert len(by_role(parsed, "metastore")) == 1
    assert len(by_role(parsed, "bookie")) == 3
    assert len(by_role(parsed, "broker")) == 1
    assert len(parsed) == 5


def test_every_service_runs_the_image_with_a_minipulsar_command() -> None:
    for name, service in load_services().items():
        assert service["build"]["dockerfile"] == "docker/Dockerfile", name
        assert isinstance(service["command"], list), f"{name}: use the exec form (a list)"


def test_metadata_urls_point_at_the_metastore_service(parsed: dict[str, argparse.Namespace]) -> None:
    [(metastore_name, metastore)] = by_role(parsed, "metastore").items()
    for name, args in parsed.items():
        if args.command in ("bookie", "broker"):
            url = urlsplit(args.metadata_url)
            assert (url.scheme, url.hostname, url.port) == ("metastore", metastore_name, metastore.port), name


def test_servers_listen_on_every_interface_of_their_container(parsed: dict[str, argparse.Namespace]) -> None:
    for name, args in parsed.items():
        assert args.bind_address == "0.0.0.0", name


def test_bookies_advertise_their_own_service_name(parsed: dict[str, argparse.Namespace]) -> None:
    for name, args in by_role(parsed, "bookie").items():
        assert args.advertised_address == name


def test_bookie_volumes_come_from_the_disk_variables_one_dir_per_bookie(parsed: dict[str, argparse.Namespace]) -> None:
    services = load_services()
    for name, args in by_role(parsed, "bookie").items():
        mounts = volumes(services[name])
        [journal_dir] = args.journal_dir  # --journal-dir is repeatable
        [ledger_dir] = args.ledger_dirs.split(",")
        assert mounts[journal_dir] == f"${{JOURNAL_DISK:-./data/journal-disk}}/{name}"
        assert mounts[ledger_dir] == f"${{LEDGER_DISK:-./data/ledger-disk}}/{name}"


def test_disk_variables_move_journals_and_ledgers_to_other_mounts(parsed: dict[str, argparse.Namespace]) -> None:
    env = {"JOURNAL_DISK": "/mnt/ssd", "LEDGER_DISK": "/mnt/hdd"}
    bookie = load_services()["bookie-1"]
    sources = sorted(interpolate(source, env) for source in volumes(bookie).values())
    assert sources == ["/mnt/hdd/bookie-1", "/mnt/ssd/bookie-1"]
    assert sorted(interpolate(s, {}) for s in volumes(bookie).values()) == [
        "./data/journal-disk/bookie-1",
        "./data/ledger-disk/bookie-1",
    ]


def test_metastore_data_dir_is_a_volume(parsed: dict[str, argparse.Namespace]) -> None:
    [(name, args)] = by_role(parsed, "metastore").items()
    assert args.data_dir in volumes(load_services()[name])


def test_broker_publishes_its_client_and_web_ports(parsed: dict[str, argparse.Namespace]) -> None:
    [(name, args)] = by_role(parsed, "broker").items()
    published = {tuple(int(p) for p in str(spec).split(":")) for spec in load_services()[name]["ports"]}
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


def test_broker_waits_for_the_metastore_and_every_bookie(parsed: dict[str, argparse.Namespace]) -> None:
    [name] = by_role(parsed, "broker")
    needs = set(load_services()[name]["depends_on"])
    assert needs == set(by_role(parsed, "bookie")) | set(by_role(parsed, "metastore"))


def test_dockerfile_copies_every_package_it_installs() -> None:
    dockerfile = (COMPOSE_PATH.parent / "docker" / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\w+) ", dockerfile, re.MULTILINE))
    assert copied >= {"minipulsar", "bookie", "broker", "client"}
    assert 'ENTRYPOINT ["minipulsar"]' in dockerfile


def test_healthchecks_probe_the_ports_the_servers_listen_on(parsed: dict[str, argparse.Namespace]) -> None:
    services = load_services()
    for name, args in {**by_role(parsed, "metastore"), **by_role(parsed, "bookie")}.items():
        probe = " ".join(services[name]["healthcheck"]["test"])
        port = args.port if args.command == "metastore" else args.http_port
        assert re.search(rf"127\.0\.0\.1'?[:,] ?{port}\b", probe), (name, probe)
