from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator

import pytest

logging.getLogger("minibroker").setLevel(logging.INFO)


def _cache_clearers() -> list[Callable[[], None]]:
    from minibroker.handlers import create_topics, metadata
    from minibroker.protocol import bounds, messages
    from minibroker.state import groups

    clearers = [
        clear
        for module in (bounds, messages, groups)
        for value in vars(module).values()
        if callable(clear := getattr(value, "cache_clear", None))
    ]
    tables = (
        messages._decoders,
        metadata._ERROR_ENTRIES,
        create_topics._REFUSALS,
        create_topics._CONFIG_LISTS,
    )
    return clearers + [table.clear for table in tables]


_emptied_in: set[int] = set()


@pytest.fixture(autouse=True)
def _fresh_caches_under_mutation() -> Iterator[None]:
    """Under mutation testing (tools/mutation.py), empty the protocol core's caches once
    in each mutant's process. mutmut forks every mutant's run from a process whose
    earlier test runs filled them, so a mutant in code that builds a cached value (a
    compiled bounds checker, an error-entry template) would otherwise never run at all."""
    if os.environ.get("MUTANT_UNDER_TEST") and os.getpid() not in _emptied_in:
        _emptied_in.add(os.getpid())
        for clear in _cache_clearers():
            clear()
    yield
