"""`minibroker jars`: which Spark release it takes for a pyspark, what it says without
Maven, and the spark.jars.packages value it prints. No network and no Maven run here (the
install test fetches for real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.commands import main
from minibroker.testing import jvm

CENTRAL_LISTS = ["3.5.9", "4.0.4", "4.1.0-preview3", "4.1.3", "4.2.0", "4.2.0-preview5"]


def _central_answer(cache: Path, coordinates: tuple[str, str], versions: list[str]) -> None:
    """What served_versions keeps after asking Central once."""
    kept = cache / "central" / f"{coordinates[0]}.{coordinates[1]}.versions"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text("\n".join(versions) + "\n")


def test_a_pyspark_without_a_connector_release_gets_the_newest_earlier_one() -> None:
    assert jvm.release_candidates("4.3.0", CENTRAL_LISTS) == ["4.2.0", "4.1.3", "4.0.4"]
    assert jvm.release_candidates("4.2.0", CENTRAL_LISTS) == ["4.2.0", "4.1.3", "4.0.4"]
    assert jvm.release_candidates("4.1.3", CENTRAL_LISTS)[0] == "4.1.3"
    # Central could not be asked: the newest release known here stands in.
    assert jvm.release_candidates("4.3.0", None) == ["4.3.0", jvm.NEWEST_KNOWN_SPARK[4]]
    assert jvm.release_candidates("4.0.1", None) == ["4.0.1"]


def test_the_suggested_packages_name_releases_central_has(tmp_path: Path) -> None:
    _central_answer(tmp_path, jvm.SPARK_CONNECTOR, CENTRAL_LISTS)
    _central_answer(tmp_path, jvm.SPARK_AVRO, ["4.0.2", "4.1.1"])
    assert jvm.spark_packages("4.3.0", tmp_path) == (
        "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0,org.apache.spark:spark-avro_2.13:4.1.1"
    )
    # A fetched bundle says which release it holds.
    folder = jvm.spark_connector("4.3.0").folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / jvm.RELEASE_FILE).write_text("4.1.3\n")
    assert jvm.spark_release("4.3.0", jvm.SPARK_CONNECTOR, tmp_path) == "4.1.3"


def test_packages_option_prints_the_value_for_the_installed_pyspark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pyspark = pytest.importorskip("pyspark")
    _central_answer(tmp_path, jvm.SPARK_CONNECTOR, [pyspark.__version__])
    _central_answer(tmp_path, jvm.SPARK_AVRO, [pyspark.__version__])
    assert main(["jars", "--packages", "--cache", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split(",") == [
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}",
        f"org.apache.spark:spark-avro_2.13:{pyspark.__version__}\n",
    ]


def test_without_maven_it_says_what_to_install_and_fails_only_when_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    cache = tmp_path / "jars"
    assert main(["jars", "clients", "kafka", "--cache", str(cache)]) == 0
    said = capsys.readouterr().err.splitlines()
    assert [line.split(":")[1].strip() for line in said] == ["clients", "kafka"]
    assert all("Maven (mvn) is not on PATH: install Maven 3" in line for line in said)
    assert main(["jars", "clients", "--strict", "--cache", str(cache)]) == 1
    assert not list(cache.glob("*"))


def test_an_unknown_bundle_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["jars", "sparks"])
    assert exit.value.code == 2
    assert "no bundle 'sparks': choose from spark, avro, clients, kafka, all" in (
        capsys.readouterr().err
    )
