from __future__ import annotations

import pytest

from tests.admin.drivers import AdminDrivers


@pytest.fixture(scope="session")
def admin_drivers(tmp_path_factory: pytest.TempPathFactory) -> AdminDrivers:
    """The admin scenario catalogue's client drivers, each built once per session."""
    return AdminDrivers(tmp_path_factory)
