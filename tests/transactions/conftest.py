"""Shared by the transaction tests: a watchdog, so a client stuck on a broker bug fails the
run instead of hanging it."""

from __future__ import annotations

import faulthandler
import sys
from collections.abc import Iterator

import pytest

WATCHDOG_SECONDS = 240


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()
