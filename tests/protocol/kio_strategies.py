"""What the property tests of kio's messages share: hypothesis strategies kio lacks or
gets wrong, registered on import, and the (api key, version) pairs kio's classes serve."""

from __future__ import annotations

import datetime

from hypothesis import strategies as st
from kio.static.primitive import Records, i64Timedelta

from minibroker.handlers import HANDLERS
from minibroker.protocol import legacy

# kio leaves the records blob without a strategy; any bytes will do for the codec.
st.register_type_strategy(Records, st.binary(max_size=64).map(Records))
# kio's native reader converts int64 milliseconds to int64 microseconds, so it only
# decodes |ms| < 2**63 / 1000, and its writer goes through float seconds, which is exact
# only well below 2**53 ms; its own strategy reaches past both. 2**50 ms is 35,000 years.
_I64_MS_EXACT = 2**50
st.register_type_strategy(
    i64Timedelta,
    st.integers(-_I64_MS_EXACT, _I64_MS_EXACT).map(
        lambda ms: i64Timedelta.parse(datetime.timedelta(milliseconds=ms))
    ),
)

# Versions older than kio's classes go through protocol/legacy.py, which checks each
# length as it reads (tests/protocol/test_legacy.py); their known-answer tests are in
# test_known_answers.py.
SERVED = [
    (api_key, version)
    for api_key, handler in sorted(HANDLERS.items())
    for version in range(handler.min_version, handler.max_version + 1)
    if not legacy.is_legacy(api_key, version)
]
