"""Install the system packages the test suite drives (kcat; Java for PySpark; Chromium for
the browser tests), when allowed.

Runs before the tests (tox commands_pre). Without root or apt the kcat tests skip and
say why; nothing else depends on it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

PACKAGES = {"kcat": "kcat", "java": "openjdk-17-jre-headless", "chromium": "chromium"}


def main() -> int:
    missing = [package for command, package in PACKAGES.items() if shutil.which(command) is None]
    if not missing:
        return 0
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        print(
            f"system_deps: {missing} missing and apt-get as root is not available; "
            "the tests that need them will skip",
            file=sys.stderr,
        )
        return 0
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
    result = subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=False, env=env)
    if result.returncode != 0:
        print(f"system_deps: could not install {missing}; those tests will skip", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
