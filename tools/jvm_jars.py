"""Fetch the JVM jars the Spark connector, Java client and real-Kafka tests use, into a cache.

    python tools/jvm_jars.py                  # the connector, both Java clients, both brokers
    python tools/jvm_jars.py spark            # only the connector for the installed pyspark
    python tools/jvm_jars.py clients          # only kafka-clients 3.9.x and 4.x
    python tools/jvm_jars.py kafka            # only Apache Kafka's broker 3.9.x and 4.x
    MINIBROKER_JARS=/some/folder python tools/jvm_jars.py

Each bundle (an artifact with its runtime dependencies) lands in a folder of its own under
`$MINIBROKER_JARS` (default `~/.cache/minibroker/jars`); a bundle already there is not
fetched again. The `spark` fixture and the Java tests find them there by themselves.

Spark's connector is fetched at the installed pyspark's version. When Maven Central has
no connector of that version yet, the newest earlier release of the same major version
is taken instead, and the tool says so.

Without Maven or a network the tool reports what it could not fetch and exits 0, so the
tests that need the jars skip and say why; `--strict` makes that an error.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# From a checkout, installed or not.
from minibroker.testing import jvm

CENTRAL = "https://repo.maven.apache.org/maven2"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
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
        raise FetchFailed("Maven (mvn) is not on PATH")
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


def served_versions(group: str, artifact: str) -> list[str]:
    """The versions Maven Central lists for an artifact (its maven-metadata.xml)."""
    url = f"{CENTRAL}/{group.replace('.', '/')}/{artifact}/maven-metadata.xml"
    with urllib.request.urlopen(url, timeout=30) as answer:
        text = answer.read().decode()
    return re.findall(r"<version>([^<]+)</version>", text)


def _release(version: str) -> tuple[int, ...] | None:
    parts = version.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def connector_candidates(pyspark_version: str, served: list[str]) -> list[str]:
    """The connector versions to try for a pyspark: its own, then earlier releases of the
    same major version, newest first (no previews)."""
    wanted = _release(pyspark_version)
    if wanted is None:
        return [pyspark_version]
    earlier = sorted(
        (r, v)
        for v in served
        if (r := _release(v)) is not None and r[0] == wanted[0] and r < wanted
    )
    return [pyspark_version, *(v for _, v in reversed(earlier))]


def fetch_spark(cache: Path) -> str:
    try:
        import pyspark
    except ImportError as exc:
        raise FetchFailed("pyspark is not installed; no connector to match") from exc
    wanted = pyspark.__version__
    if jvm.connector_jars(wanted, cache) is not None:
        return f"Spark connector for pyspark {wanted}: cached"
    try:
        served = served_versions(*jvm.SPARK_CONNECTOR)
    except OSError:
        served = []
    problems = []
    for version in connector_candidates(wanted, served)[:3]:
        bundle = jvm.spark_connector(wanted, version)
        try:
            jars = fetch(bundle, cache)
        except FetchFailed as exc:
            problems.append(str(exc))
            continue
        (bundle.folder(cache) / "CONNECTOR_VERSION").write_text(version + "\n")
        note = "" if version == wanted else f" (Maven Central has no {wanted} connector yet)"
        return f"Spark connector {version} for pyspark {wanted}: {len(jars)} jars{note}"
    raise FetchFailed("; ".join(problems))


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


BUNDLES = {"spark": fetch_spark, "clients": fetch_clients, "kafka": fetch_brokers}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="*", metavar="|".join(BUNDLES), help="default: all")
    parser.add_argument("--strict", action="store_true", help="fail when a bundle cannot be had")
    args = parser.parse_args()
    if unknown := set(args.what) - set(BUNDLES):
        parser.error(f"unknown bundle(s) {sorted(unknown)}: choose from {', '.join(BUNDLES)}")
    wanted = args.what or list(BUNDLES)
    cache = jvm.cache_dir()
    failed = False
    for name, step in BUNDLES.items():
        if name not in wanted:
            continue
        try:
            print(f"jvm_jars: {step(cache)} in {cache}")
        except FetchFailed as exc:
            failed = True
            print(f"jvm_jars: {exc}; the tests that need these jars will skip", file=sys.stderr)
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    raise SystemExit(main())
