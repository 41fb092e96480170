"""CI's guard of the lab's publish-throttling finding (minipulsar/lab/scenarios/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab import describe, run_quick


@pytest.mark.timeout(200)
async def test_publish_throttling_bounds_the_brokers_pending_bytes_and_loses_nothing(tmp_path: Path) -> None:
    result = await run_quick("publish-throttling", tmp_path)
    assert result.reproduced, describe(result)
    lost = result.headline("acknowledged messages the consumer did not receive")
    assert lost.baseline == lost.tuned == 0, describe(result)
