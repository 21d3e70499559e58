"""ApiVersions (key 18), versions 0-4.

The advertised ranges come from the handler registry, never from a second list. Produce
is listed from v0 although v0-2 are not served, as Kafka 4 lists it: librdkafka before
2.11.1 compresses gzip, snappy and lz4 batches only for a broker that lists Produce v0.
A request at a version above 4 gets UNSUPPORTED_VERSION in the v0 body layout, listing
the ApiVersions range, so the client can retry at a version both sides know.
With `kafka_version` set, the ranges are cut to what that Kafka release's brokers served
(protocol/kafka_releases.py), and the dispatcher treats the versions cut off as unserved.
v3+ carry Kafka 4's feature levels that clients act on, as Kafka 4.x finalizes them for a
new cluster, each only while the versions it stands for are advertised (so no Kafka 3.x
emulation lists any): transaction.version 2 (Produce v12, EndTxn v5, TxnOffsetCommit v5:
transactions of KIP-890 part 2) and group.version 1 (ConsumerGroupHeartbeat: the consumer
protocol). Below v4 a feature whose lowest level is 0 is left out of the supported ones,
as Kafka does (older clients refused a minimum of 0). Not done: Kafka's other features
(metadata.version, kraft.version, share.version, streams.version,
eligible.leader.replicas.version), which no client acts on or whose APIs are not served.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import HANDLERS, RequestContext, api
from minibroker.protocol.kafka_releases import RELEASES
from minibroker.protocol.messages import (
    SplicedResponse,
    array_length,
    build,
    encode_entity,
    response_class,
    response_module,
)

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4
FIRST_FEATURES_VERSION = 3
ZERO_MIN_FEATURES_VERSION = 4  # KAFKA-17011: v3 readers refused a supported minimum of 0


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    highest: int  # the highest level supported (the lowest is 0), finalized as Kafka 4.x does
    needs: tuple[tuple[int, int], ...]  # (api key, version) pairs the level stands for


FEATURES = (
    Feature("group.version", 1, ((68, 0),)),
    Feature("transaction.version", 2, ((0, 12), (26, 5), (28, 5))),
)
# Kafka's epoch is the metadata offset of the last feature change; these never change.
# Clients take the features of an epoch above the last they saw, starting from -1.
FEATURES_EPOCH = 0
NO_FEATURES_EPOCH = -1


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


def advertised_features(ranges: dict[int, tuple[int, int]]) -> list[Feature]:
    """The features whose versions are all within the advertised `ranges`."""
    return [
        feature
        for feature in FEATURES
        if all(
            key in ranges and ranges[key][0] <= version <= ranges[key][1]
            for key, version in feature.needs
        )
    ]


# The answer to each (emulated release, version): it never changes while the broker runs,
# and a storm of new connections asks for it once per connection.
_ANSWERS: dict[tuple[str | None, int], SplicedResponse] = {}
ERROR_CODE_BYTES = 2  # the one field before api_keys


@api(API_KEY, "ApiVersions", MIN_VERSION, MAX_VERSION)
def handle(ctx: RequestContext, request: Any) -> Any:
    key = (ctx.cluster.config.kafka_version, ctx.version)
    answer = _ANSWERS.get(key)
    if answer is None:
        answer = _ANSWERS[key] = _pre_encoded(_response(ctx))
    return answer


def _pre_encoded(response: Any) -> SplicedResponse:
    """`response` with its api_keys encoded once, spliced into every answer."""
    items = [encode_entity(item) for item in response.api_keys]
    empty = dataclasses.replace(response, api_keys=())
    empty_array = array_length(0, response.__flexible__)
    suffix = len(encode_entity(empty)) - ERROR_CODE_BYTES - len(empty_array)
    return SplicedResponse(empty, items, suffix)


def _response(ctx: RequestContext) -> Any:
    ranges = advertised_ranges(ctx.cluster.config.kafka_version)
    api_keys = tuple(
        ctx.make("ApiVersion", api_key=key, min_version=low, max_version=high)
        for key, (low, high) in ranges.items()
    )
    features = advertised_features(ranges) if ctx.version >= FIRST_FEATURES_VERSION else []
    supported = tuple(
        ctx.make("SupportedFeatureKey", name=f.name, min_version=0, max_version=f.highest)
        for f in features
        if ctx.version >= ZERO_MIN_FEATURES_VERSION
    )
    finalized = tuple(
        ctx.make(
            "FinalizedFeatureKey",
            name=f.name,
            max_version_level=f.highest,
            min_version_level=f.highest,
        )
        for f in features
    )
    return ctx.response(
        error_code=ErrorCode.none,
        api_keys=api_keys,
        throttle_time=NO_THROTTLE,
        supported_features=supported,
        finalized_features_epoch=FEATURES_EPOCH if features else NO_FEATURES_EPOCH,
        finalized_features=finalized,
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
