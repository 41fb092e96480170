"""``python -m bench``: the benchmark suite (bench/suite/; see bench/README.md)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests.support and the project packages import as in the tests
    sys.path.insert(0, str(ROOT))

from bench.suite.main import main  # noqa: E402

sys.exit(main())
