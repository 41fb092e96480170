"""Micro-benchmark of the entry digest (minipulsar/bookkeeper/digest.py): the cost per entry
of DigestManager.package (writer) and verify (reader), by digest type and entry size.

Run: ``.venv/bin/python bench/digest_bench.py``. Sketch: CRC32C runs at several GB/s in C, so
below ~16 KiB the fixed cost (struct packing, one join, one slice) dominates: ~0.5 us to
package and ~1 us to verify a 1 KiB entry, against ~10 us of broker CPU per add elsewhere.
"""

import timeit
from functools import partial

from minipulsar.bookkeeper.digest import DigestManager, DigestType


def main() -> None:
    for digest_type in DigestType:
        digest = DigestManager(1, digest_type, b"pw")
        for size in (100, 1024, 16 * 1024, 128 * 1024):
            payload = bytes(size)
            data = digest.package(5, 4, 1000, payload)
            number = 20000 if size < 20000 else 2000
            package_us = min(timeit.repeat(partial(digest.package, 5, 4, 1000, payload), number=number, repeat=3))
            verify_us = min(timeit.repeat(partial(digest.verify, 5, data), number=number, repeat=3))
            print(
                f"{digest_type.value:7} {size:7} B  package {package_us / number * 1e6:7.2f} us"
                f"  verify {verify_us / number * 1e6:7.2f} us"
            )


if __name__ == "__main__":
    main()
