"""Debian packages the tests need, installed where the machine allows (root, apt-get)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

INSTALL_TIMEOUT_S = 900


def apt_install(packages: list[str], installed: Callable[[], bool], *, recommends: bool = True) -> None:
    """``apt-get install -y packages``, then ``apt-get update`` and again when that did not make
    ``installed()`` true. Does nothing without root or apt-get; the caller checks ``installed()``
    afterwards and skips with its reason."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", *([] if recommends else ["--no-install-recommends"]), *packages]
    for commands in ([install], [["apt-get", "update"], install]):
        for command in commands:
            subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=INSTALL_TIMEOUT_S)
        if installed():
            return
