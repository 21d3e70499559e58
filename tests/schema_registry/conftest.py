"""A plain HTTP/1.1 client for the registry tests (the standard library's http.client), for
the requests that SchemaRegistryClient has no call for or whose raw answer matters."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# The error code of an incompatible schema: 409 in Confluent's releases up to 8.1,
# 40901 (Errors.INCOMPATIBLE_SCHEMA_ERROR_CODE) since; the HTTP status is 409 in both.
INCOMPATIBLE = (409, 40901)


@dataclass
class Response:
    status_code: int
    headers: dict[str, str]  # lower-case names
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class RawHttp:
    """One keep-alive connection to `base_url`, reopened when the server closes it."""

    def __init__(self, base_url: str, timeout: float = 10.0) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.timeout = timeout
        self._connection: http.client.HTTPConnection | None = None

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        sent_headers = {"Accept": "application/vnd.schemaregistry.v1+json", **(headers or {})}
        body = content
        if json_body is not None:
            body = json.dumps(json_body).encode()
            sent_headers.setdefault("Content-Type", "application/vnd.schemaregistry.v1+json")
        for attempt in (1, 2):
            connection = self._connection or http.client.HTTPConnection(
                self.host, self.port, timeout=self.timeout
            )
            self._connection = connection
            try:
                connection.request(method, path, body=body, headers=sent_headers)
                answer = connection.getresponse()
                data = answer.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
                continue
            if answer.will_close:
                self.close()
            return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, data)
        raise AssertionError("unreachable")

    def get(self, path: str, **kwargs: Any) -> Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Response:
        return self.request("POST", path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> Response:
        return self.request("PUT", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Response:
        return self.request("DELETE", path, **kwargs)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __enter__(self) -> RawHttp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
