"""Debian packages the tests need, installed where the machine allows (root, apt-get).

One install at a time on the machine: the suite's workers (pytest-xdist) may each find a package
missing at once, and two apt-gets collide on dpkg's lock (the second fails at once). An exclusive
``flock`` on :data:`LOCK_PATH` serialises every :func:`apt_install` of every test process here, and
``installed()`` is asked again once it is held (the worker that waited finds the other's install
done); ``DPkg::Lock::Timeout`` makes apt-get wait for dpkg's lock held by anyone else.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable

INSTALL_TIMEOUT_S = 900
LOCK_PATH = "/tmp/minipulsar-tests-apt.lock"
"""Machine-wide, as dpkg's lock is: every checkout's test processes take the same one."""


def apt_install(packages: list[str], installed: Callable[[], bool], *, recommends: bool = True) -> None:
    """``apt-get install -y packages``, then ``apt-get update`` and again when that did not make
    ``installed()`` true. Does nothing without root or apt-get, or when ``installed()`` is true
    once the machine's install lock is held; the caller checks ``installed()`` afterwards and
    skips with its reason."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt_get = ["apt-get", "-o", f"DPkg::Lock::Timeout={INSTALL_TIMEOUT_S}"]
    install = [*apt_get, "install", "-y", *([] if recommends else ["--no-install-recommends"]), *packages]
    with open(LOCK_PATH, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if installed():
            return
        for commands in ([install], [[*apt_get, "update"], install]):
            for command in commands:
                subprocess.run(
                    command, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=INSTALL_TIMEOUT_S
                )
            if installed():
                return
