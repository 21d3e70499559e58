"""Spark's Python processes import the installed, byte-compiled pyspark, not the copy
without bytecode in $SPARK_HOME/python/lib/pyspark.zip that Spark puts first on their
PYTHONPATH (regression: "Python worker failed to connect back" on a loaded machine)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from minibroker.testing.spark import worker_site
from minibroker.testing.spark.session import worker_site_dir


def fake_pyspark(site: Path) -> Path:
    """A pip-style install: site/pyspark is the package and SPARK_HOME."""
    package = site / "pyspark"
    (package / "python" / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name in ("pyspark.zip", "py4j-0.10.9.9-src.zip"):
        (package / "python" / "lib" / name).write_bytes(b"")
    return package


def archives(home: Path) -> list[str]:
    lib = home / "python" / "lib"
    return [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]


def test_archives_move_behind_the_installed_pyspark_they_copy(tmp_path: Path) -> None:
    home = fake_pyspark(tmp_path / "site")
    jar = str(home / "jars" / "spark-core.jar")
    path = [*archives(home), jar, "/usr/lib/python3", str(tmp_path / "site")]
    assert worker_site.reordered(path, str(home)) == [
        jar,
        "/usr/lib/python3",
        str(tmp_path / "site"),
        *archives(home),
    ]


def test_a_spark_distribution_elsewhere_keeps_its_archives_first(tmp_path: Path) -> None:
    fake_pyspark(tmp_path / "site")
    distribution = tmp_path / "opt" / "spark"
    (distribution / "python" / "lib").mkdir(parents=True)
    path = [*archives(distribution), str(tmp_path / "site")]
    assert worker_site.reordered(path, str(distribution)) == path
    assert worker_site.reordered(path, None) == path


def test_without_an_installed_pyspark_nothing_moves(tmp_path: Path) -> None:
    home = fake_pyspark(tmp_path / "site")
    path = [*archives(home), str(tmp_path / "elsewhere")]
    assert worker_site.reordered(path, str(home)) == path


def test_a_sitecustomize_it_shadows_still_runs(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins\nbuiltins.SHADOWED_RAN = True\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([worker_site_dir(), str(other)]),
        "SPARK_HOME": str(tmp_path / "no-spark"),
    }
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "import builtins, sitecustomize as s; "
            "print(s.__file__, getattr(builtins, 'SHADOWED_RAN', False))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert shown == [str(Path(worker_site_dir()) / "sitecustomize.py"), "True"]


@pytest.mark.filterwarnings("ignore:Cannot infer the eval type")
def test_spark_python_workers_import_the_installed_pyspark(spark: Any) -> None:
    import pyspark
    from pyspark.sql import functions as F

    @F.udf("array<string>")
    def where_from(_: Any) -> list[str]:
        import os

        import pyspark

        return [str(pyspark.__file__), os.environ.get("SPARK_HOME", "")]

    (found,) = spark.range(1).select(where_from("id")).first()
    worker_pyspark, home = found
    installed = os.path.dirname(pyspark.__file__)
    if os.path.realpath(home) != os.path.realpath(installed):
        pytest.skip(f"SPARK_HOME={home!r} is not the installed pyspark package")
    assert "pyspark.zip" not in worker_pyspark
    assert os.path.realpath(worker_pyspark) == os.path.realpath(pyspark.__file__)
