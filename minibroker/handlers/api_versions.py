"""ApiVersions (key 18), versions 0-4.

The advertised ranges come from the handler registry, never from a second list. Produce
is listed from v0 although v0-2 are not served, as Kafka 4 lists it: librdkafka before
2.11.1 compresses gzip, snappy and lz4 batches only for a broker that lists Produce v0.
A request at a version above 4 gets UNSUPPORTED_VERSION in the v0 body layout, listing
the ApiVersions range, so the client can retry at a version both sides know.
Not done: supported and finalized features (empty).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import HANDLERS, RequestContext, api
from minibroker.protocol.messages import build, response_class, response_module

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


@api(API_KEY, "ApiVersions", MIN_VERSION, MAX_VERSION)
def handle(ctx: RequestContext, request: Any) -> Any:
    api_keys = tuple(
        ctx.make(
            "ApiVersion",
            api_key=handler.api_key,
            min_version=handler.advertised_min,
            max_version=handler.max_version,
        )
        for handler in sorted(HANDLERS.values(), key=lambda h: h.api_key)
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


def unsupported_version_response() -> Any:
    """The v0-layout answer to an ApiVersions request at a version above ours."""
    module = response_module(API_KEY, 0)
    return build(
        response_class(API_KEY, 0),
        error_code=ErrorCode.unsupported_version,
        api_keys=(
            build(
                module.ApiVersion, api_key=API_KEY, min_version=MIN_VERSION, max_version=MAX_VERSION
            ),
        ),
    )
