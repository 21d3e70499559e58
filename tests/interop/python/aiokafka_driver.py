"""The client matrix's aiokafka driver, run by path (tests/interop/test_client_matrix.py):
the scenario is in tests/interop/clients/aiokafka_client.py, beside the in-process adapter."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.interop.clients.aiokafka_client import main

if __name__ == "__main__":
    raise SystemExit(main())
