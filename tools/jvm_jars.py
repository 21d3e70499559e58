"""Fetch the JVM jars the Spark connectors, Java client and real-Kafka tests use, into a cache.

The same as `python -m minibroker jars` (minibroker/commands/jars.py), kept for scripts
that run it from a checkout:

    python tools/jvm_jars.py [spark|avro|clients|kafka|all ...] [--strict] [--cache DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# From a checkout, installed or not.
from minibroker.commands import main

if __name__ == "__main__":
    raise SystemExit(main(["jars", *sys.argv[1:]]))
