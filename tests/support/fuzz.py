"""How many examples a property test draws: CI's count, times TANDEM_FUZZ_SCALE when exploring.

Profiles (registered in tests/conftest.py): `ci`, the default, is reproducible (a fixed
seed per test and no example database); `explore` (`make fuzz`) draws fresh seeds every
run and, with TANDEM_FUZZ_SCALE, many more examples.
"""

from __future__ import annotations

import os

SCALE = max(1, int(os.environ.get("TANDEM_FUZZ_SCALE", "1")))


def examples(count: int) -> int:
    return count * SCALE
