"""Everyday command-line tools for any Kafka-protocol broker: `minibroker topics`,
`groups`, `produce`, `consume` and `configs`; and `minibroker jars`, which fetches the JVM
jars the Spark and Java tests use.

Each command group is a module with a `register(subparsers)` that adds its parsers, each
parser carrying the function that runs it (`run`) and its name (`prog`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

# The first word of a tool's command line (the broker's own parser lists them too). The
# modules are imported when a tool runs, so the broker starts without confluent-kafka.
COMMANDS = ("topics", "groups", "produce", "consume", "configs", "jars")
EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    from minibroker.commands import configs, groups, jars, records, topics

    top = Parser(
        prog="minibroker",
        description="Command-line tools for any Kafka-protocol broker.",
        epilog="Example: minibroker topics list --bootstrap-server localhost:9092",
    )
    commands = top.add_subparsers(dest="tool", metavar="COMMAND", required=True)
    for module in (topics, groups, records, configs, jars):
        module.register(commands)
    return top


def main(argv: list[str]) -> int:
    """Run one tool; expected failures are one line on stderr and exit code 1 (the
    broker) or 2 (the command line)."""
    from minibroker.commands.common import ToolError

    args = parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except ToolError as exc:
        print(f"{args.prog}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        quiet_stdout()
        return 0
    return code


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so what is still buffered cannot fail at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
