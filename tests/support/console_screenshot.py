"""``python -m tests.support.console_screenshot``: redo ``docs/console.png``, the README's picture of the web console.

It starts a cluster like the console's browser test (a metastore, 3 bookies, 2 brokers, in a
temp dir on free ports), puts steady traffic on it (:func:`tests.support.perf_load.perf_load`),
opens ``/console/`` on broker 0 in headless Chromium, waits until the message chart holds
``--points`` points and a topic on each broker is listed, and saves the whole page, ``--width``
wide, as a 256-colour PNG (the page is flat colours: a palette keeps it small).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.browser import chromium_unavailable_reason, headless_chromium
from tests.support.cluster import make_cluster
from tests.support.console_page import CONSOLE_CLUSTER_SETTINGS, console_url, page_state
from tests.support.perf_load import perf_load

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "docs" / "console.png"


def _save(driver: Any, out: Path, width: int) -> None:
    from PIL import Image

    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    raw = out.with_suffix(".raw.png")
    driver.save_screenshot(str(raw))
    Image.open(raw).convert("RGB").quantize(colors=256).save(out, optimize=True)
    raw.unlink()


def _wait(driver: Any, points: int, brokers: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        state = page_state(driver)
        if state.points["chart-msgs"] >= points and set(brokers) <= set(state.topics.values()):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"the console did not fill within {timeout_s:g} s: {state}")
        time.sleep(0.5)


async def take(out: Path, points: int, width: int) -> None:
    with tempfile.TemporaryDirectory(prefix="console-screenshot-") as tmp:
        root = Path(tmp)
        async with make_cluster(root, bookies=3, brokers=2, broker_settings=CONSOLE_CLUSTER_SETTINGS) as cluster:
            brokers = [cluster.broker_id(i) for i in range(2)]
            with perf_load(cluster.service_url, "persistent://public/default/orders", root / "perf", topics=6):
                with headless_chromium(width, 800) as driver:
                    driver.get(console_url(cluster))
                    await asyncio.to_thread(_wait, driver, points, brokers, 60 + 3 * points)
                    await asyncio.to_thread(_save, driver, out, width)
    print(f"{out}: {out.stat().st_size // 1024} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--points", type=int, default=30, help="chart points to wait for (one per 2 s)")
    parser.add_argument("--width", type=int, default=1280)
    args = parser.parse_args()
    reason = chromium_unavailable_reason()
    if reason is not None:
        raise SystemExit(reason)
    asyncio.run(take(args.out, args.points, args.width))


if __name__ == "__main__":
    main()
