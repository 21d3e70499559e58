"""Small helpers shared by handlers."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

NO_THROTTLE = datetime.timedelta(0)


def error(code: int) -> ErrorCode:
    return ErrorCode(code)


def millis(delta: datetime.timedelta) -> int:
    return int(delta.total_seconds() * 1000)
