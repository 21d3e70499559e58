"""A child-process broker with a data directory whose share group has members set up
directly (tests/share/members.py), for restart and kill -9 tests.

    python -m tests.share.share_child DATA_DIR PORT GROUP MEMBER...

Prints the line harness.child_broker.ChildBroker waits for; SIGTERM stops it cleanly.
"""

from __future__ import annotations

import signal
import sys
import threading

from minibroker import Broker
from tests.share.members import add_member


def main(argv: list[str]) -> None:
    data_dir, port, group, *members = argv
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    with Broker(port=int(port), data_dir=data_dir, log_flush="os") as broker:
        for member in members:
            broker._on_loop(lambda member=member: add_member(broker.state, group, member))
        print(f"listening, bootstrap.servers={broker.bootstrap_servers}", flush=True)
        stop.wait()


if __name__ == "__main__":
    main(sys.argv[1:])
