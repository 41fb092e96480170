"""CI's guard of the lab's hdd-reads-push-writes finding (minipulsar/lab/scenarios/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab import describe, run_quick


@pytest.mark.timeout(240)
async def test_journal_and_ledgers_on_two_disks_keep_publish_p99_lower_under_a_catch_up_read(tmp_path: Path) -> None:
    result = await run_quick("hdd-reads-push-writes", tmp_path)
    assert result.reproduced, describe(result)
