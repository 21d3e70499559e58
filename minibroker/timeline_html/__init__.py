"""The timeline report: one self-contained HTML file drawn from a timeline dict
(`minibroker.timeline`, version 1). The page carries its CSS, its script and the
timeline JSON inline, so it opens from disk with no network; the script (`timeline.js`)
and style (`timeline.css`) are package files that the console can serve as they are."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any

__all__ = ["asset", "render_report", "timeline_json"]

_PLACEHOLDER = re.compile("@@(TITLE|DATA|CSS|JS)@@")


def asset(name: str) -> str:
    """The text of one of the report's package files: report.html, timeline.js, timeline.css."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def timeline_json(timeline: dict[str, Any]) -> str:
    """The timeline as compact JSON, safe inside a <script> element: every "<" is escaped,
    so a client id or record holding "</script>" cannot end the element early."""
    text = json.dumps(timeline, separators=(",", ":"), default=str, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_report(timeline: dict[str, Any]) -> str:
    """One HTML page showing `timeline`, with everything it needs inline."""
    title = str(timeline.get("title") or "minibroker timeline")
    parts = {
        "TITLE": html.escape(title),
        "DATA": timeline_json(timeline),
        "CSS": asset("timeline.css"),
        "JS": asset("timeline.js").replace("</script", "<\\/script"),
    }
    # One pass: text put in (client ids, records) is never searched for placeholders.
    return _PLACEHOLDER.sub(lambda found: parts[found.group(1)], asset("report.html"))
