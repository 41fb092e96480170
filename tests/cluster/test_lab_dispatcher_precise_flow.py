"""CI's guard of the lab's dispatcher-precise-flow finding (minipulsar/lab/scenarios/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab import describe, run_quick


@pytest.mark.timeout(180)
async def test_precise_flow_control_bounds_what_a_slow_batch_consumer_holds(tmp_path: Path) -> None:
    result = await run_quick("dispatcher-precise-flow", tmp_path)
    assert result.reproduced, describe(result)
