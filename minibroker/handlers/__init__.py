"""One module per Kafka API. Importing this package registers them all."""

from minibroker.handlers import (
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
from minibroker.handlers.registry import HANDLERS, Pending, RequestContext, lookup

__all__ = [
    "HANDLERS",
    "Pending",
    "RequestContext",
    "api_versions",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_cluster",
    "describe_configs",
    "fetch",
    "init_producer_id",
    "list_offsets",
    "lookup",
    "metadata",
    "produce",
]
