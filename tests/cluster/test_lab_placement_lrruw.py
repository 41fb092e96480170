"""CI's guard of the lab's placement-lrruw finding (minipulsar/lab/scenarios/).

Not yet a reliable reproduction: the tuned run moves fewer bundles, but under the 2x guard (the
full run in docs/lab: 33 -> 21, 1.6x), with small counts on the quick profile; xfail (not
strict) until the scenario's design gives a margin. The quick profile is kept short for CI's
sake while the finding is not guarded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab import describe, run_quick


@pytest.mark.xfail(reason="gain under the 2x guard: small counts (see the module)", strict=False)
@pytest.mark.timeout(180)
async def test_least_resource_usage_placement_moves_fewer_bundles_than_least_message_rate(tmp_path: Path) -> None:
    result = await run_quick("placement-lrruw", tmp_path)
    assert result.reproduced, describe(result)
