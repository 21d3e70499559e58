"""SaslAuthenticate (key 36), versions 0-2.

Carries one SASL token each way (state/sessions.py has the rules). A refused token gets
SASL_AUTHENTICATION_FAILED with Kafka's message, and the connection closes after the
answer. From v1 the answer completing the exchange tells the client how long its session
lasts (connections_max_reauth_ms; 0 = for ever).
"""

from __future__ import annotations

import datetime
from typing import Any

from minibroker.handlers.registry import RequestContext, api


@api(36, "SaslAuthenticate", 0, 2)
def handle(ctx: RequestContext, request: Any) -> Any:
    outcome = ctx.session.authenticate(request.auth_bytes, ctx.now_ms())
    return ctx.response(
        error_code=outcome.error_code,
        error_message=outcome.error_message,
        auth_bytes=outcome.token,
        session_lifetime=datetime.timedelta(milliseconds=outcome.session_lifetime_ms),
    )
