"""A Confluent-compatible Schema Registry served beside the broker (docs/schema-registry.md).

The HTTP listener (minibroker/http_edge.py) and the Kafka client that reads and writes the
`_schemas` topic (store.py) are the edge; the rules (state.py), the routes (api.py) and
the schema types (schemas/) are sans-IO.
"""

from minibroker.schema_registry.service import SchemaRegistry

__all__ = ["SchemaRegistry"]
