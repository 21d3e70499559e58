"""A transactional producer killed before it commits: run as a child process by
tests/transactions, which SIGKILLs it once it says its records are in the log.

    python producer_killed_mid_transaction.py BOOTSTRAP TOPIC TRANSACTIONAL_ID COUNT PARTITIONS

It opens a transaction, produces COUNT records ("lost-<i>", spread over PARTITIONS),
waits until every one is acknowledged (so they are in the log, uncommitted), prints
"produced" and sleeps: it never commits, aborts or closes.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Producer


def main() -> None:
    bootstrap, topic, transactional_id, count, partitions = sys.argv[1:6]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60_000,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(int(count)):
        producer.produce(topic, f"lost-{i}".encode(), partition=i % int(partitions))
    if producer.flush(30) != 0:
        sys.exit("records were not acknowledged")
    print("produced", flush=True)
    time.sleep(600)  # the test kills it long before this ends


if __name__ == "__main__":
    main()
