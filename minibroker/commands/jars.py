"""`minibroker jars`: fetch the JVM jars that Spark's connectors, the Java client tests and the
`kafka-jvm` backend use, with Maven, into the jar cache (minibroker/testing/jvm.py).

    minibroker jars                  # everything: spark, avro, clients, kafka
    minibroker jars spark avro       # Spark's Kafka connector and spark-avro for the pyspark here
    minibroker jars clients          # kafka-clients 3.9.x and 4.x
    minibroker jars kafka            # Apache Kafka's broker 3.9.x and 4.x
    minibroker jars --packages       # print a spark.jars.packages value instead

Each bundle (an artifact with its runtime dependencies) lands in a folder of its own under
`--cache` (default `$MINIBROKER_JARS`, else `~/.cache/minibroker/jars`); a bundle already
there is not fetched again. Spark's bundles are fetched at the installed pyspark's version,
or, when Maven Central has none of that version, at the newest earlier release of the same
major version.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minibroker.testing import jvm

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
INSTALL_MAVEN = (
    "Maven (mvn) is not on PATH: install Maven 3 and Java 17+ (apt-get install maven "
    "openjdk-17-jdk-headless, brew install maven, or https://maven.apache.org/install.html)"
)
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>minibroker.jars</groupId>
  <artifactId>fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


class FetchFailed(Exception):
    pass


def fetch(bundle: jvm.Bundle, cache: Path) -> list[Path]:
    """Copy `bundle` and its runtime dependencies into its folder (once)."""
    have = bundle.jars(cache)
    if have is not None:
        return have
    if shutil.which("mvn") is None:
        raise FetchFailed(INSTALL_MAVEN)
    folder = bundle.folder(cache)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="minibroker-jars-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(
            POM.format(group=bundle.group, artifact=bundle.artifact, version=bundle.version)
        )
        done = subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "-f",
                str(pom),
                f"{DEPENDENCY_PLUGIN}:copy-dependencies",
                f"-DoutputDirectory={folder}",
                "-DincludeScope=runtime",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        errors = [line for line in done.stdout.splitlines() if "[ERROR]" in line][:3]
        raise FetchFailed(f"mvn could not fetch {bundle.coordinates}: " + " / ".join(errors))
    (folder / jvm.COMPLETE).write_text(bundle.coordinates + "\n")
    jars = bundle.jars(cache)
    assert jars is not None
    return jars


def _pyspark_version() -> str:
    try:
        import pyspark
    except ImportError as exc:
        raise FetchFailed(
            "pyspark is not installed (pip install 'minibroker[spark]'); no Spark to match"
        ) from exc
    return str(pyspark.__version__)


def fetch_spark_bundle(
    cache: Path, coordinates: tuple[str, str], make: Callable[..., jvm.Bundle], label: str
) -> str:
    """Fetch a Spark artifact for the installed pyspark: its own version when Maven Central
    has it, else the newest earlier release of the same major version."""
    wanted = _pyspark_version()
    if make(wanted).jars(cache) is not None:
        return f"{label} {jvm.fetched_release(make(wanted), cache)} for pyspark {wanted}: cached"
    served = jvm.served_versions(coordinates, cache, refresh=True)
    problems = []
    for version in jvm.release_candidates(wanted, served)[:3]:
        bundle = make(wanted, version)
        try:
            jars = fetch(bundle, cache)
        except FetchFailed as exc:
            problems.append(str(exc))
            if str(exc) == INSTALL_MAVEN:
                break
            continue
        (bundle.folder(cache) / jvm.RELEASE_FILE).write_text(version + "\n")
        note = "" if version == wanted else f" (Maven Central has no {wanted} release of it)"
        return f"{label} {version} for pyspark {wanted}: {len(jars)} jars{note}"
    raise FetchFailed("; ".join(problems) or f"Maven Central lists no {label} for {wanted}")


def fetch_connector(cache: Path) -> str:
    return fetch_spark_bundle(cache, jvm.SPARK_CONNECTOR, jvm.spark_connector, "Spark connector")


def fetch_avro(cache: Path) -> str:
    return fetch_spark_bundle(cache, jvm.SPARK_AVRO, jvm.spark_avro, "spark-avro")


def fetch_lines(cache: Path, bundles: list[jvm.Bundle], label: str) -> str:
    """Fetch one bundle per release line; say how many jars each has."""
    shown = [f"{label} {b.version}: {len(fetch(b, cache))} jars" for b in bundles]
    return ", ".join(shown)


def fetch_clients(cache: Path) -> str:
    return fetch_lines(
        cache, [jvm.kafka_clients(line) for line in jvm.KAFKA_CLIENTS], "kafka-clients"
    )


def fetch_brokers(cache: Path) -> str:
    return fetch_lines(
        cache, [jvm.kafka_broker(line) for line in jvm.KAFKA_BROKERS], "Kafka broker"
    )


BUNDLES: dict[str, Callable[[Path], str]] = {
    "spark": fetch_connector,
    "avro": fetch_avro,
    "clients": fetch_clients,
    "kafka": fetch_brokers,
}
WHAT = {
    "spark": "Spark's Kafka connector (format 'kafka') for the installed pyspark",
    "avro": "spark-avro (from_avro, to_avro) for the installed pyspark",
    "clients": "Kafka's Java client, " + " and ".join(jvm.KAFKA_CLIENTS.values()),
    "kafka": "Apache Kafka's broker (--kafka-backend=kafka-jvm), "
    + " and ".join(jvm.KAFKA_BROKERS.values()),
    "all": "all of them (the default)",
}


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "jars",
        help="fetch the JVM jars of Spark's connectors, the Java client and Kafka (Maven)",
        description="Fetch JVM jars with Maven (mvn, Java 17+) into the jar cache, where the\n"
        "spark fixture, the Java client tests and --kafka-backend=kafka-jvm find them.\n"
        "A bundle already in the cache is not fetched again.\n\nbundles:\n"
        + "\n".join(f"  {name:<8} {text}" for name, text in WHAT.items()),
        epilog="Example:\n  minibroker jars spark avro\n  "
        "MINIBROKER_JARS=/ci/jars minibroker jars kafka --strict",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(run=run, prog=parser.prog)
    parser.add_argument(
        "what",
        nargs="*",
        type=_bundle,
        metavar="BUNDLE",
        help=f"{', '.join([*BUNDLES, 'all'])} (default: all)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a bundle cannot be fetched (default: say so and exit 0)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        metavar="DIR",
        help=f"where the bundles go (default: ${jvm.CACHE_ENV}, else ~/.cache/minibroker/jars)",
    )
    parser.add_argument(
        "--packages",
        action="store_true",
        help="fetch nothing; print a spark.jars.packages value naming Spark's Kafka "
        "connector and spark-avro at versions Maven Central has for the installed pyspark",
    )


def _bundle(name: str) -> str:
    if name not in WHAT:
        raise argparse.ArgumentTypeError(f"no bundle {name!r}: choose from {', '.join(WHAT)}")
    return name


def run(args: argparse.Namespace) -> int:
    cache: Path = (args.cache or jvm.cache_dir()).expanduser()
    if args.packages:
        try:
            print(jvm.spark_packages(_pyspark_version(), cache))
        except FetchFailed as exc:
            print(f"{args.prog}: {exc}", file=sys.stderr)
            return 1
        return 0
    wanted = set(args.what) - {"all"} if "all" not in args.what else set()
    failed = False
    for name, step in BUNDLES.items():
        if wanted and name not in wanted:
            continue
        try:
            print(f"{args.prog}: {step(cache)} in {cache}", flush=True)
        except FetchFailed as exc:
            failed = True
            print(
                f"{args.prog}: {name}: {exc}; the tests that need these jars skip, or fail "
                "where the JVM path was asked for",
                file=sys.stderr,
            )
    return 1 if failed and args.strict else 0
