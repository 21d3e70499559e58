"""The benchmarks' Go program: franz-go's kfake as an anchor, and a franz-go consumer.

The program (main.go here; its commands are listed there) is built from the Go module
proxy on first use into `~/.cache/minibroker/bench/gobench-<hash of its sources>/`
(MINIBROKER_BENCH_CACHE moves it); nothing built is kept in the repository.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

SOURCES = Path(__file__).resolve().parent
BUILD_TIMEOUT_S = 600


def cache_folder() -> Path:
    default = Path.home() / ".cache" / "minibroker" / "bench"
    return Path(os.environ.get("MINIBROKER_BENCH_CACHE", default))


def binary() -> Path:
    """The built program, building it first when its sources changed."""
    files = sorted(p for p in SOURCES.iterdir() if p.suffix in (".go", ".mod"))
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in files))
    folder = cache_folder() / f"gobench-{digest.hexdigest()[:12]}"
    program = folder / "gobench"
    if program.exists():
        return program
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("Go is not installed (go on PATH): bench/gobench cannot be built")
    work = folder.with_name(folder.name + ".build")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for source in files:
        shutil.copy(source, work / source.name)
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    for step in (["mod", "tidy"], ["build", "-o", "gobench", "."]):
        done = subprocess.run(
            [go, *step], cwd=work, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
        )
        if done.returncode != 0:
            raise RuntimeError(f"go {' '.join(step)} in bench/gobench failed: {done.stderr[-800:]}")
    shutil.rmtree(folder, ignore_errors=True)
    work.rename(folder)
    return program
