"""A web console served from the broker's process (docs/console.md): one static page
(static/) calling a JSON API; the views (views.py) are sans-IO, the server (server.py)
is the edge."""

from minibroker.console.server import Console

__all__ = ["Console"]
