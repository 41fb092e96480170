"""The fault harness's CI profile: a cluster of processes (metastore, 3 bookies at 2/2/2, 2
brokers) under the seeded nemesis (kills, pauses, partitions, metastore restarts, a full and
a slow ledger disk), deduplicated producers recording every send, the whole log read back and
checked (:mod:`tests.support.jepsen`).

``MINIPULSAR_JEPSEN_PROFILES`` (comma-separated, default ``single,overlap``: one fault at a
time, then a broker down together with a bookie of its ensemble) picks the profiles run;
``MINIPULSAR_JEPSEN_SEED`` and ``MINIPULSAR_JEPSEN_SECONDS`` the seed and the nemesis's time.
The disk faults need root and loop devices; without them they are left out and the table says
why. ``make soak`` runs the same for as long as asked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.jepsen.profiles import PROFILES
from tests.support.jepsen.run import run_once

PROFILE_NAMES = os.environ.get("MINIPULSAR_JEPSEN_PROFILES", "single,overlap").split(",")
SEED = int(os.environ.get("MINIPULSAR_JEPSEN_SEED", "18"))
NEMESIS_S = float(os.environ.get("MINIPULSAR_JEPSEN_SECONDS", "50"))

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("profile", PROFILE_NAMES)
@pytest.mark.expect_error_log(r"is full: usage", r"No space left on device")  # the disk-full fault's
async def test_every_acknowledged_message_survives_the_nemesis(tmp_path: Path, profile: str) -> None:
    result = await run_once(tmp_path, PROFILES[profile], SEED, NEMESIS_S, pace_s=0.02)
    print(result.table())
    assert result.ok, result.table()
    assert result.report.counts["acked"] > 100, "the workload made progress"
    assert set(result.faults) == set(PROFILES[profile].kinds) - set(result.skipped), "every kind ran"
