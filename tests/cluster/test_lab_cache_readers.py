"""CI's guard of the lab's cache-readers finding (minipulsar/lab/scenarios/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab import describe, run_quick


@pytest.mark.timeout(120)
async def test_tailing_readers_hit_the_entry_cache_once_their_cursors_count_as_active(tmp_path: Path) -> None:
    result = await run_quick("cache-readers", tmp_path)
    assert result.reproduced, describe(result)
    assert result.headline("bookie reads").gain > 5, describe(result)
