"""Run the `parity` tests against several Apache Kafka releases at once.

Each release runs in its own pytest process with its own broker JVM; the runs mostly wait
on Kafka's own timers (rebalance delays, session timeouts, record locks), so running them
side by side costs the time of the longest rather than the sum. Each run's output is
printed whole when it ends, and the exit code is the first non-zero one.

    python tools/parity.py 4 3.9 [-- extra pytest arguments]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    if "--" in argv:
        split = argv.index("--")
        versions, extra = argv[:split], argv[split + 1 :]
    else:
        versions, extra = argv, []
    if not versions:
        print(__doc__, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="parity-") as folder:
        runs: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        for version in versions:
            log = Path(folder) / f"kafka-{version}.log"
            command = [
                sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-ra",
                "-m", "parity", "--kafka-backend=kafka-jvm", f"--kafka-jvm-version={version}",
                *extra,
            ]  # fmt: skip
            with log.open("wb") as output:
                process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
            runs.append((version, process, log))
            time.sleep(5)  # the brokers' JVMs start one after the other
        status = 0
        for version, process, log in runs:
            code = process.wait()
            print(f"===== parity against Apache Kafka {version}: exit {code} =====", flush=True)
            sys.stdout.buffer.write(log.read_bytes())
            sys.stdout.flush()
            status = status or code
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
