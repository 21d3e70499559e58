"""ListTransactions (key 66), versions 0-1.

The transactional ids this node coordinates, filtered as Kafka filters them: by state
names (a name that is no state is listed back in unknown_state_filters), by producer ids,
and (v1) by open for longer than duration_filter ms (-1: any). Empty filters match all.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers._transactions import is_transaction_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.transaction_rules import TxnState

STATE_NAMES = frozenset(state.value for state in TxnState)
ANY_DURATION = -1


@api(66, "ListTransactions", 0, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    states = set(request.state_filters)
    producer_ids = set(request.producer_id_filters)
    duration = getattr(request, "duration_filter", ANY_DURATION)
    now_ms = ctx.cluster.clock.wall_ms()
    listed = []
    for txn in ctx.cluster.transactions.transactions.values():
        if states and txn.state.value not in states:
            continue
        if producer_ids and txn.producer_id not in producer_ids:
            continue
        if duration >= 0 and (
            txn.state is not TxnState.ONGOING or now_ms - txn.start_wall_ms < duration
        ):
            continue
        if not is_transaction_coordinator(ctx, txn.transactional_id):
            continue
        listed.append(
            ctx.make(
                "TransactionState",
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                transaction_state=txn.state.value,
            )
        )
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        unknown_state_filters=tuple(sorted(states - STATE_NAMES)),
        transaction_states=tuple(listed),
    )
