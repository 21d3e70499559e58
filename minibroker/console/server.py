"""The console's HTTP side: routes, HTTP Basic auth and the static page, over the shared
HTTP/1.1 edge (minibroker/http_edge.py), on the broker's event loop.

The views (views.py) read the cluster state directly: the answer callback runs on the
loop that serves Kafka clients, so each view is short and bounded (a browse reads at most
a few MiB of one partition).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from collections.abc import Callable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

from minibroker.console import views
from minibroker.http_edge import HttpServer, Request, Response

if TYPE_CHECKING:
    from minibroker.config import BrokerConfig
    from minibroker.server import NodeServer
    from minibroker.state.cluster import ClusterState


class ServedCluster(Protocol):
    """What the console reads of the cluster that serves it (minibroker.cluster.Cluster)."""

    state: ClusterState
    config: BrokerConfig
    nodes: list[NodeServer]

    @property
    def bootstrap_servers(self) -> str: ...

    def timeline(self, title: str | None = None) -> dict[str, Any]: ...


log = logging.getLogger("minibroker.console")

MAX_BODY_BYTES = 1024 * 1024
REALM = 'Basic realm="minibroker console", charset="UTF-8"'
STATIC = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
# The timeline report's renderer, served as it is (minibroker/timeline_html).
TIMELINE_ASSETS = {
    "timeline.js": "text/javascript; charset=utf-8",
    "timeline.css": "text/css; charset=utf-8",
}
# The page loads nothing from elsewhere and is never framed.
PAGE_HEADERS = (
    ("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
)
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
# At most this share of the broker's loop goes to rebuilding the timeline for the page.
TIMELINE_SHARE = 0.1
CACHE_ABOVE_S = 0.05


def _json(status: int, body: Any, *extra: tuple[str, str]) -> Response:
    return Response(status, json.dumps(body).encode(), "application/json", PAGE_HEADERS + extra)


def _error(status: int, message: str, *extra: tuple[str, str]) -> Response:
    return _json(status, {"error_code": status, "message": message}, *extra)


class Console:
    """The web console of `cluster` on http://HOST:PORT (docs/console.md)."""

    def __init__(
        self,
        cluster: ServedCluster,
        host: str,
        port: int,
        *,
        allow_changes: bool = False,
        schema_lookup: views.SchemaLookup | None = None,
    ) -> None:
        self._cluster = cluster
        self._host = host
        self._allow_changes = allow_changes
        self._schema_lookup = schema_lookup
        package = resources.files("minibroker.console").joinpath("static")
        self._static = {
            name: (package.joinpath(name).read_bytes(), kind) for name, kind in STATIC.items()
        }
        timeline = resources.files("minibroker.timeline_html")
        self._static.update(
            {
                name: (timeline.joinpath(name).read_bytes(), kind)
                for name, kind in TIMELINE_ASSETS.items()
            }
        )
        self._http = HttpServer(self._answer, host, port, MAX_BODY_BYTES, name="the console")
        self._timeline_cache: dict[str, Any] | None = None
        self._timeline_fresh_until = 0.0

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._http.port}"

    async def start(self) -> Console:
        await self._http.start()
        log.info("console ready, console.url=%s", self.url)
        return self

    async def stop(self) -> None:
        await self._http.stop()

    async def _answer(self, request: Request) -> Response:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        split = urlsplit(request.target)
        path = unquote(split.path)
        query = dict(parse_qsl(split.query))
        if not path.startswith("/api/"):
            return self._page(request.method, path)
        if request.method not in ("GET", "HEAD"):
            if not self._allow_changes:
                return _error(403, "the console is read-only: start it with console_allow_changes")
            # Forms and other simple cross-site requests cannot send this type.
            if not request.headers.get("content-type", "").startswith("application/json"):
                return _error(415, "changes are sent as application/json")
        try:
            reply = self._route(request.method, path, query, request.body)
        except views.Refused as refused:
            return _error(refused.status, str(refused))
        return _json(reply.status, reply.body)

    def _refusal(self, request: Request) -> Response | None:
        host = request.headers.get("host", "").rsplit(":", 1)[0].lower()
        if self._host in ("127.0.0.1", "::1", "localhost") and host not in LOOPBACK_NAMES:
            # A page of another site reaching the console through DNS rebinding.
            return _error(421, "the console answers requests for its loopback address only")
        credentials = self._cluster.state.credentials
        if len(credentials) == 0:
            return None
        user = _basic_user(request.headers.get("authorization", ""))
        if user is None or not credentials.check_password(*user):
            return _error(401, "sign in as a SASL user", ("WWW-Authenticate", REALM))
        return None

    def _page(self, method: str, path: str) -> Response:
        if path in ("/", "/index.html"):
            name = "index.html"
        elif path.startswith("/static/"):
            name = path.removeprefix("/static/")
        else:
            name = ""
        if name not in self._static:
            return _error(404, f"no page {path[:200]}")
        if method not in ("GET", "HEAD"):
            return _error(405, "pages are read with GET")
        content, kind = self._static[name]
        return Response(200, content, kind, PAGE_HEADERS)

    def _route(self, method: str, path: str, query: Mapping[str, str], body: bytes) -> views.Reply:
        state = self._cluster.state
        parts = path.removeprefix("/api/").strip("/").split("/")
        resource, rest = parts[0], "/".join(parts[1:])
        reads: dict[str, Callable[[], views.Reply]] = {
            "overview": self._overview,
            "topics": lambda: views.topics(state),
            "messages": lambda: views.browse(state, query, self._schema_lookup),
            "groups": lambda: views.groups(state, self._timeline()),
            "transactions": lambda: views.transactions(state),
            "security": lambda: views.security(state, len(state.credentials) > 0),
            "faults": lambda: views.faults(state.faults),
            "timeline": lambda: views.ok(self._timeline()),
        }
        if method in ("GET", "HEAD") and resource in reads and not rest:
            return reads[resource]()
        if method == "POST" and not rest and resource in ("topics", "messages", "faults"):
            payload = _json_body(body)
            if resource == "topics":
                return views.create_topic(state, payload)
            if resource == "messages":
                return views.produce(state, payload, state.clock.wall_ms())
            return views.add_fault(state.faults, payload)
        if method == "DELETE" and rest and resource == "topics":
            return views.delete_topic(state, rest)
        if method == "DELETE" and rest and resource == "faults":
            return views.remove_fault(state.faults, rest)
        if resource in reads or resource in ("topics", "faults"):
            raise views.Refused(405, f"{method} is not served on {path[:200]}")
        raise views.Refused(404, f"no API {path[:200]}")

    def _overview(self) -> views.Reply:
        config = self._cluster.config
        return views.ok(
            {
                "cluster_id": config.cluster_id,
                "bootstrap_servers": self._cluster.bootstrap_servers,
                "nodes": len(self._cluster.nodes),
                "allow_changes": self._allow_changes,
                "security": len(self._cluster.state.credentials) > 0,
                "schema_registry": self._schema_lookup is not None,
                "recording": any(
                    node.dispatcher.recording is not None
                    and node.dispatcher.recording.write_line is None
                    for node in self._cluster.nodes
                ),
            }
        )

    def _timeline(self) -> dict[str, Any] | None:
        """The cluster's timeline. Building it reads every recorded request on the broker's
        loop: one that took over CACHE_ABOVE_S is kept for its build time / TIMELINE_SHARE,
        so that the page's refreshes take at most that share of the loop."""
        now = time.monotonic()
        if self._timeline_cache is not None and now < self._timeline_fresh_until:
            return self._timeline_cache
        try:
            built = self._cluster.timeline(title="minibroker console")
        except RuntimeError:  # recording is off, or written to a file
            return None
        took = time.monotonic() - now
        self._timeline_cache = built
        self._timeline_fresh_until = now + (took / TIMELINE_SHARE if took > CACHE_ABOVE_S else 0)
        return built


def _json_body(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        raise views.Refused(400, "the body is not JSON") from None
    if not isinstance(parsed, dict):
        raise views.Refused(400, "the body is a JSON object")
    return parsed


def _basic_user(header: str) -> tuple[str, str] | None:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    name, colon, password = decoded.partition(":")
    return (name, password) if colon else None
