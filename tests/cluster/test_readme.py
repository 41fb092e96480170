"""The README's Python example runs as written against a standalone cluster."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

from tests.support.process import ServerProcess

README = Path(__file__).resolve().parents[2] / "README.md"
README_URL = "pulsar://localhost:6650"


def python_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1, "the README has exactly one Python example"
    assert README_URL in blocks[0]
    return blocks[0]


SHADOWS = ("client.py", "broker.py", "bookie.py")
"""Files a user's project often has of its own: none of them may stand in for a minipulsar part."""


async def test_readme_python_example_runs(tmp_path: Path) -> None:
    """Method: start a standalone on free ports, run the example with only its service URL
    pointed there, from a directory that also holds ``client.py``, ``broker.py`` and
    ``bookie.py`` of the user's own (each fails when imported), with the project's interpreter."""
    standalone = ServerProcess(
        "standalone",
        [
            "--data-dir",
            str(tmp_path / "data"),
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
        ],
        tmp_path / "standalone.log",
    )
    await asyncio.to_thread(standalone.start, 60)
    try:
        for name in SHADOWS:
            (tmp_path / name).write_text(f"raise ImportError('the user\\'s own {name} was imported')\n")
        script = tmp_path / "example.py"
        script.write_text(python_example().replace(README_URL, f"pulsar://{standalone.address}"))
        result = await asyncio.to_thread(
            subprocess.run, [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("sent") == 3
        assert [line for line in result.stdout.splitlines() if line.startswith("received")] == [
            f"received b'hello-{i}'" for i in range(3)
        ]
    finally:
        await asyncio.to_thread(standalone.stop)
