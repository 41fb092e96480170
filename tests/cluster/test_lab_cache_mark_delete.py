"""CI's guard of the lab's cache-mark-delete finding (minipulsar/lab/scenarios/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab import describe, run_quick


@pytest.mark.timeout(120)
async def test_eviction_by_mark_delete_keeps_what_restarting_lagging_consumers_read_again(tmp_path: Path) -> None:
    result = await run_quick("cache-mark-delete", tmp_path)
    assert result.reproduced, describe(result)
    assert result.headline("cache hit rate").gain > 1.05, describe(result)
