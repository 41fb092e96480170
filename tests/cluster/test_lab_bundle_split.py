"""CI's guard of the lab's bundle-split finding (minipulsar/lab/scenarios/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab import describe, run_quick


@pytest.mark.timeout(150)
async def test_presplit_bundles_without_auto_split_spare_clients_the_disconnects(tmp_path: Path) -> None:
    result = await run_quick("bundle-split", tmp_path)
    assert result.reproduced, describe(result)
