"""Raw HTTP/1.1 exchanges for the tests that attack the broker's HTTP listeners (the
Schema Registry's and the console's): bytes sent as given, one answer read back."""

from __future__ import annotations

import contextlib
import json
import socket
from dataclasses import dataclass
from typing import Any


@dataclass
class Answer:
    status: int | None  # None: the connection closed (or reset) without an answer
    headers: dict[str, str]
    body: bytes

    def error_body(self) -> dict[str, Any]:
        """The body as a `{"error_code": int, "message": str}` refusal."""
        body = json.loads(self.body)
        assert isinstance(body, dict) and set(body) == {"error_code", "message"}, body
        assert isinstance(body["error_code"], int) and isinstance(body["message"], str)
        return body


def read_answer(sock: socket.socket) -> Answer:
    """One HTTP response off the socket, or status None if it closes first."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return Answer(None, {}, data)
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return Answer(int(status_line.split()[1]), headers, body)
    except (ConnectionResetError, BrokenPipeError):
        return Answer(None, {}, data)


def exchange(port: int, *parts: bytes, timeout: float = 10.0) -> Answer:
    """Send raw bytes (stopping quietly if the server closes on us) and read the answer.
    A server that neither answers nor closes within `timeout` fails the test."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            for part in parts:
                sock.sendall(part)
        return read_answer(sock)
