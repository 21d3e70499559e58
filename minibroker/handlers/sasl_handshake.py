"""SaslHandshake (key 17), versions 0-1.

Chooses the SASL mechanism a connection authenticates with (state/sessions.py has the
rules): the answer lists the enabled mechanisms, with UNSUPPORTED_SASL_MECHANISM for one
not enabled (the connection then closes) and ILLEGAL_SASL_STATE where no handshake is
due (on a PLAINTEXT or SSL listener, or twice).
"""

from __future__ import annotations

from typing import Any

from minibroker.handlers.registry import RequestContext, api


@api(17, "SaslHandshake", 0, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    error_code, mechanisms = ctx.session.handshake(request.mechanism, ctx.version)
    return ctx.response(error_code=error_code, mechanisms=mechanisms)
