"""Hardening tests. `pytest -m fuzz` selects the fuzz campaign."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fuzz: the wire-protocol fuzz campaign against a child broker (slow)"
    )
