"""CreateTopics (key 19), versions 0-7 (0-1 through protocol/legacy.py).

num_partitions -1 takes the broker's num.partitions; replication factor -1 means 1 and
anything above the number of brokers is INVALID_REPLICATION_FACTOR. Unknown topic
configs are INVALID_CONFIG. validate_only checks without creating. Topics beyond what
one request may create (max_partitions_per_request, max_partitions_per_broker) get
POLICY_VIOLATION with a message saying which limit. Topics are worked through
TOPICS_PER_PIECE at a time, and other clients are served between pieces.
Created topics (and those validate_only would create) carry, from v5, every topic
config with its value and source, as Kafka's do: the Java Admin client reads them.
A manual replica assignment (num_partitions and replication_factor -1) places each
partition on the brokers it names, checked as Kafka checks them
(INVALID_REPLICA_ASSIGNMENT; INVALID_REQUEST when a count is given too).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import may_create_topic
from minibroker.handlers._common import (
    NO_THROTTLE,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_TOPIC,
    CreationAllowance,
    error,
)
from minibroker.handlers.registry import RequestContext, Steps, api
from minibroker.protocol.messages import (
    SplicedResponse,
    StringVariants,
    encode_array,
    encode_entity,
)
from minibroker.state.topic_configs import effective_configs, validate_topic_configs
from minibroker.state.topic_errors import TopicError

_REFUSALS: dict[tuple[int, str], StringVariants] = {}
_CONFIG_LISTS: dict[tuple[int, tuple[tuple[str, str], ...], tuple[object, ...]], bytes] = {}
MAX_CACHED_CONFIG_LISTS = 256
NO_TAGS = b"\x00"
NULL_LIST_AND_NO_TAGS = b"\x00" + NO_TAGS
FLEXIBLE_VERSION = 5
# About a quarter of a millisecond of work: the longest other clients wait between pieces.
TOPICS_PER_PIECE = 100
FIRST_SPLICED_VERSION = 2


def _result(
    ctx: RequestContext,
    name: str,
    code: ErrorCode,
    message: str | None,
    *,
    topic_id: Any = None,
    partitions: int = -1,
    replication: int = -1,
    configs: dict[str, str] | None = None,
) -> bytes | Any:
    """A topic's result, encoded; for the legacy versions 0-1 (protocol/legacy.py),
    which are not spliced, the entity itself."""
    entity = ctx.make(
        "CreatableTopicResult",
        name=name,
        topic_id=topic_id,
        error_code=code,
        error_message=message,
        topic_config_error_code=0,
        num_partitions=partitions,
        replication_factor=replication,
        configs=None,
    )
    if ctx.version < FIRST_SPLICED_VERSION:
        return entity
    encoded = encode_entity(entity)
    if configs is None or ctx.version < FLEXIBLE_VERSION:
        return encoded
    # The configs list is the last field, before the (empty) tag section: its null
    # marker is swapped for the list, encoded once per distinct set of topic configs
    # (a request may create a thousand topics with the same ones).
    assert encoded.endswith(NULL_LIST_AND_NO_TAGS)
    return encoded[: -len(NULL_LIST_AND_NO_TAGS)] + _configs(ctx, configs) + NO_TAGS


def _configs(ctx: RequestContext, configs: dict[str, str]) -> bytes:
    registry = ctx.cluster.topics
    key = (ctx.version, tuple(sorted(configs.items())), registry.defaults_key)
    encoded = _CONFIG_LISTS.get(key)
    if encoded is None:
        items = [
            encode_entity(
                ctx.make(
                    "CreatableTopicConfigs",
                    name=name,
                    value=value,
                    read_only=False,
                    config_source=SOURCE_DYNAMIC_TOPIC
                    if set_on_topic
                    else registry.default_sources.get(name, SOURCE_DEFAULT),
                    is_sensitive=False,
                )
            )
            for name, (value, set_on_topic) in sorted(
                effective_configs(configs, registry.defaults).items()
            )
        ]
        encoded = _CONFIG_LISTS[key] = encode_array(items, flexible=True)
        if len(_CONFIG_LISTS) > MAX_CACHED_CONFIG_LISTS:
            _CONFIG_LISTS.clear()
    return encoded


def _refusals(ctx: RequestContext, message: str) -> StringVariants:
    """Refused topics' results, from a template: a request may name 100,000 topics."""
    variants = _REFUSALS.get((ctx.version, message))
    if variants is None:
        template = ctx.make(
            "CreatableTopicResult",
            name="",
            topic_id=None,
            error_code=ErrorCode.policy_violation,
            error_message=message,
            topic_config_error_code=0,
            num_partitions=-1,
            replication_factor=-1,
            configs=None,
        )
        variants = _REFUSALS[(ctx.version, message)] = StringVariants(template, "name")
    return variants


@api(19, "CreateTopics", 0, 7)
def handle(ctx: RequestContext, request: Any) -> Steps:
    return Steps(_create(ctx, request))


def _create(ctx: RequestContext, request: Any) -> Generator[None, None, Any]:
    cluster = ctx.cluster
    results: list[Any] = []
    allowance = CreationAllowance(cluster.config.max_partitions_per_request)
    refused: StringVariants | None = None
    for index, wanted in enumerate(request.topics):
        if index and not index % TOPICS_PER_PIECE:
            yield
        assignments = [(a.partition_index, a.broker_ids) for a in wanted.assignments or ()]
        if assignments:
            # Counts come from the assignments (the registry refuses any given as well).
            partitions, replication = len(assignments), len(assignments[0][1])
        else:
            partitions = (
                wanted.num_partitions
                if wanted.num_partitions != -1
                else cluster.config.num_partitions
            )
            replication = wanted.replication_factor if wanted.replication_factor != -1 else 1
        if not may_create_topic(ctx, wanted.name):
            code = ErrorCode.topic_authorization_failed
            results.append(_result(ctx, wanted.name, code, "Authorization failed."))
            continue
        if not allowance.take(partitions):
            if ctx.version < FIRST_SPLICED_VERSION:
                message = allowance.refusal()
                results.append(_result(ctx, wanted.name, ErrorCode.policy_violation, message))
                continue
            if refused is None:
                refused = _refusals(ctx, allowance.refusal())
            results.append(refused.encode(wanted.name))
            continue
        try:
            asked = {c.name: c.value for c in wanted.configs}
            topic = cluster.topics.create(
                wanted.name,
                wanted.num_partitions if assignments else partitions,
                replication_factor=wanted.replication_factor if assignments else replication,
                assignments=assignments,
                configs=asked,
                validate_only=request.validate_only,
            )
            defaults = cluster.topics.defaults
            configs = topic.configs if topic else validate_topic_configs(asked, defaults)
        except TopicError as exc:
            results.append(_result(ctx, wanted.name, error(exc.error_code), exc.message))
            continue
        results.append(
            _result(
                ctx,
                wanted.name,
                ErrorCode.none,
                None,
                topic_id=topic.topic_id if topic else None,
                partitions=partitions,
                replication=replication,
                configs=configs,
            )
        )
    if ctx.version < FIRST_SPLICED_VERSION:
        return ctx.response(throttle_time=NO_THROTTLE, topics=tuple(results))
    response = ctx.response(throttle_time=NO_THROTTLE, topics=())
    # After the topics array: only the tag section of flexible versions.
    return SplicedResponse(response, results, int(ctx.version >= FLEXIBLE_VERSION))
