"""Suite-wide test settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from collapselab._threads import serial_threads


@pytest.fixture(autouse=True)
def _serial_threads() -> Iterator[None]:
    # Test tensors are tiny: torch's and BLAS's thread pools only add synchronisation, and on a
    # busy 2-core machine spinning workers made small loops 10-100x slower.
    with serial_threads():
        yield
