"""ApiVersions (key 18), versions 0-4.

The advertised ranges come from the handler registry, never from a second list. Produce
is listed from v0 although v0-2 are not served, as Kafka 4 lists it: librdkafka before
2.11.1 compresses gzip, snappy and lz4 batches only for a broker that lists Produce v0.
A request at a version above 4 gets UNSUPPORTED_VERSION in the v0 body layout, listing
the ApiVersions range, so the client can retry at a version both sides know.
With `kafka_version` set, the ranges are cut to what that Kafka release's brokers served
(protocol/kafka_releases.py), and the dispatcher treats the versions cut off as unserved.
Not done: supported and finalized features (empty).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import HANDLERS, RequestContext, api
from minibroker.protocol.kafka_releases import RELEASES
from minibroker.protocol.messages import build, response_class, response_module

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


def advertised_ranges(kafka_version: str | None) -> dict[int, tuple[int, int]]:
    """api key -> (oldest, newest) version advertised: every API and version served or,
    emulating a Kafka release, those of them that release's brokers served."""
    served = {h.api_key: (h.advertised_min, h.max_version) for h in HANDLERS.values()}
    if kafka_version is None:
        return dict(sorted(served.items()))
    release = RELEASES[kafka_version]
    capped = {}
    for key, (low, high) in sorted(served.items()):
        if key in release:
            oldest, newest = max(low, release[key][0]), min(high, release[key][1])
            if oldest <= newest:
                capped[key] = (oldest, newest)
    return capped


@api(API_KEY, "ApiVersions", MIN_VERSION, MAX_VERSION)
def handle(ctx: RequestContext, request: Any) -> Any:
    api_keys = tuple(
        ctx.make("ApiVersion", api_key=key, min_version=low, max_version=high)
        for key, (low, high) in advertised_ranges(ctx.cluster.config.kafka_version).items()
    )
    return ctx.response(
        error_code=ErrorCode.none,
        api_keys=api_keys,
        throttle_time=NO_THROTTLE,
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )


def unsupported_version_response(oldest: int = MIN_VERSION, newest: int = MAX_VERSION) -> Any:
    """The v0-layout answer to an ApiVersions request at a version above ours."""
    module = response_module(API_KEY, 0)
    return build(
        response_class(API_KEY, 0),
        error_code=ErrorCode.unsupported_version,
        api_keys=(
            build(module.ApiVersion, api_key=API_KEY, min_version=oldest, max_version=newest),
        ),
    )
