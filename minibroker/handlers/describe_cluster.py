"""DescribeCluster (key 60), versions 0-2.

Lists the brokers of the cluster (none fenced) and the controller and, when asked
(include_cluster_authorized_operations), the client's authorized operations on the
cluster (handlers/_acls.py).
Not done: controller endpoints (endpoint_type 2) are answered with the brokers.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import authorized_operations
from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import CLUSTER_NAME, ResourceType


@api(60, "DescribeCluster", 0, 2)
def handle(ctx: RequestContext, request: Any) -> Any:
    cluster = ctx.cluster
    brokers = tuple(
        ctx.make(
            "DescribeClusterBroker",
            broker_id=node.node_id,
            host=host,
            port=port,
            rack=node.rack,
            is_fenced=False,
        )
        for node in sorted(cluster.nodes.values(), key=lambda n: n.node_id)
        for host, port in (ctx.endpoint(node),)
    )
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=getattr(request, "endpoint_type", 1),
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        brokers=brokers,
        cluster_authorized_operations=authorized_operations(
            ctx,
            ResourceType.CLUSTER,
            CLUSTER_NAME,
            asked=request.include_cluster_authorized_operations,
        ),
    )
