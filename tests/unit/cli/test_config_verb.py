"""Goal: ``minipulsar config list`` prints each server's conf file and ``config write`` writes
them, exactly the generated text; a directory that cannot be written is exit code 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from minipulsar.cli.main import main
from minipulsar.config import CONF_FILES, conf_file, conf_text


@pytest.mark.parametrize("role", ["broker", "bookie", "metastore"])
def test_list_prints_the_roles_conf_file(role: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "list", role]) == 0
    assert capsys.readouterr().out == conf_text(conf_file(role))


def test_list_without_a_role_prints_all_three(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "list"]) == 0
    assert capsys.readouterr().out == "\n".join(conf_text(conf) for conf in CONF_FILES)


def test_write_writes_every_file_into_the_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / "conf"
    assert main(["config", "write", str(directory)]) == 0
    for conf in CONF_FILES:
        assert (directory / conf.name).read_text(encoding="utf-8") == conf_text(conf)
    assert capsys.readouterr().out.split() == [str(directory / conf.name) for conf in CONF_FILES]


def test_write_into_a_file_is_exit_code_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    occupied = tmp_path / "conf"
    occupied.write_text("not a directory")
    assert main(["config", "write", str(occupied)]) == 1
    assert capsys.readouterr().err.startswith(f"error: cannot write {occupied}")


def test_an_unknown_role_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["config", "list", "proxy"])
    assert caught.value.code == 2 and "invalid choice: 'proxy'" in capsys.readouterr().err
