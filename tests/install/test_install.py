"""The new user's path: the built wheel in a fresh virtual environment, the README's quick
start run exactly as written, a downstream project whose own `consumer.py`, `fixtures/`
package and `conftest.py` sit beside the plugin's fixtures, and the JVM jars fetched through
the installed command."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def _run(
    args: list[str], cwd: Path, timeout: float = 600, **more_env: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env.update(more_env)
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with nothing but the built wheel (and its dependencies)
    and pytest with pytest-asyncio, as a downstream project would have."""
    base = tmp_path_factory.mktemp("install")
    wheels = base / "wheels"
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        cwd=base,
    )
    (wheel,) = wheels.glob("minibroker-*.whl")
    environment = base / "venv"
    venv.EnvBuilder(with_pip=True).create(environment)
    python = environment / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "-q", str(wheel), "pytest", "pytest-asyncio"],
        cwd=base,
    )
    return environment


def test_the_wheel_installs_one_top_level_package(fresh_venv: Path) -> None:
    python = fresh_venv / "bin" / "python"
    listing = _run(
        [
            str(python),
            "-c",
            "import minibroker, pathlib; print(pathlib.Path(minibroker.__file__).parent.parent)",
        ],
        cwd=fresh_venv,
    ).stdout.strip()
    site = Path(listing)
    assert (site / "minibroker" / "consumer" / "engine.py").exists()
    assert (site / "minibroker" / "testing" / "plugin.py").exists()
    assert (site / "minibroker" / "timeline_html" / "timeline.js").exists()  # package data
    assert not (site / "consumer").exists()
    assert not (site / "fixtures").exists()


def test_the_readme_quick_start_prints_only_its_result(fresh_venv: Path, tmp_path: Path) -> None:
    script = tmp_path / "quick_start.py"
    script.write_text(PYTHON_BLOCKS[0])
    result = _run([str(fresh_venv / "bin" / "python"), str(script)], cwd=tmp_path)
    assert result.stdout == "b'hello'\n"
    assert result.stderr == ""


def test_a_downstream_project_with_its_own_consumer_and_fixtures_modules(
    fresh_venv: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "fixtures").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "consumer.py").write_text("def handle(record):\n    return f'handled {record}'\n")
    (project / "fixtures" / "__init__.py").write_text("SAMPLE = ['a', 'b']\n")
    (project / "conftest.py").write_text(
        "import pytest\nfrom consumer import handle\nfrom fixtures import SAMPLE\n\n\n"
        "@pytest.fixture\ndef sample():\n    return [handle(item) for item in SAMPLE]\n"
    )
    (project / "tests" / "test_readme_example.py").write_text(PYTHON_BLOCKS[1])
    (project / "tests" / "test_own_modules.py").write_text(
        textwrap.dedent(
            """
            import pytest
            from aiokafka import AIOKafkaProducer


            def test_own_modules_and_fixtures(sample, kafka_topic, kafka_produce, kafka_consume):
                topic = kafka_topic()
                kafka_produce(topic, sample)
                assert [r.value for r in kafka_consume(topic, 2)] == sample


            @pytest.mark.asyncio
            async def test_async_in_strict_mode(kafka_topic, kafka_config, kafka_consume):
                topic = kafka_topic()
                producer = AIOKafkaProducer(**kafka_config.aiokafka_producer())
                await producer.start()
                try:
                    await producer.send_and_wait(topic, b"async")
                finally:
                    await producer.stop()
                assert kafka_consume(topic, 1)[0].value == "async"
            """
        )
    )
    binaries = fresh_venv / "bin"
    for command in ([str(binaries / "pytest")], [str(binaries / "python"), "-m", "pytest"]):
        result = _run([*command, "-q", "-p", "no:cacheprovider"], cwd=project)
        assert "3 passed" in result.stdout, result.stdout


def test_the_installed_command_fetches_jvm_jars(fresh_venv: Path, tmp_path: Path) -> None:
    """`python -m minibroker jars` from the wheel alone, no checkout: its help, then one
    bundle (the Java client) fetched into a cache of the test's own (Maven keeps its
    downloads in ~/.m2, so a second run takes seconds)."""
    python = str(fresh_venv / "bin" / "python")
    helped = _run([python, "-m", "minibroker", "jars", "--help"], cwd=tmp_path)
    assert "usage: minibroker jars" in helped.stdout
    assert "clients" in helped.stdout
    if shutil.which("mvn") is None:
        pytest.skip("Maven (mvn) is not on PATH; `minibroker jars` needs it to fetch")
    cache = tmp_path / "jars"
    fetched = _run(
        [python, "-m", "minibroker", "jars", "clients", "--strict"],
        cwd=tmp_path,
        MINIBROKER_JARS=str(cache),
    )
    assert f"in {cache}" in fetched.stdout
    for version in ("3.9.2", "4.4.0"):
        folder = cache / f"kafka-clients-{version}"
        assert (folder / "COMPLETE").is_file()
        assert (folder / f"kafka-clients-{version}.jar").is_file()
    again = _run(
        [python, "-m", "minibroker", "jars", "clients"], cwd=tmp_path, MINIBROKER_JARS=str(cache)
    )
    assert again.stdout == fetched.stdout  # nothing fetched twice: the same jars, counted


def test_each_module_has_one_name() -> None:
    """consumer/ and fixtures/ are imported as minibroker.consumer and minibroker.testing
    only: importing every module of every package the build lists leaves no file loaded
    under two names (as a symbolic link or a second sys.path entry would)."""
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]
    for package in packages:
        for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
            if module.name != "__main__":  # runs the command line
                importlib.import_module(f"{package}.{module.name}")
    folders = ("minibroker", "consumer", "fixtures")
    sources = tuple(str(ROOT / folder) + os.sep for folder in folders)
    names_by_file: dict[str, list[str]] = {}
    for name, module in list(sys.modules.items()):
        file = os.path.realpath(getattr(module, "__file__", None) or os.devnull)
        if file.startswith(sources):
            names_by_file.setdefault(file, []).append(name)
    assert {file: names for file, names in names_by_file.items() if len(names) > 1} == {}
    assert "consumer" not in sys.modules
    assert "fixtures" not in sys.modules
    assert Path(sys.modules["minibroker.consumer"].__file__ or "").parent == ROOT / "consumer"
    assert Path(sys.modules["minibroker.testing"].__file__ or "").parent == ROOT / "fixtures"
