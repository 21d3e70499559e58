"""Hostile-client benchmark: every attack of harness/attack_catalogue.py, measured.

    python -m bench.hostile [--quick] [--runs N] [--slow] [--only TEXT] [--kill-margin MIB]
                            [--against minibroker|kafka-jvm]

Each attack runs against a fresh `python -m minibroker` in a child process (the settings
are the regression tests' own, small timeouts included), while an honest producer in a
process of its own sends one 100-byte message per request with acks=1. Per attack:
- the honest rate before the attack (median of three 0.4 s windows);
- the honest rate during the attack and within 2 s after it, as ratios of that baseline
  (the machine's noise hits both sides of a ratio alike), per second of wall time and per
  second of the broker's CPU time (the second barely moves when other processes take the
  CPU; a target counts as met when either ratio meets it);
- peak RSS minus the RSS before the attack, and the data stored meanwhile;
- whether the targets hold: the process lives, peak RSS <= baseline + stored data +
  256 MiB (tighter where the test says so), honest rate during >= 0.5x and after >= 0.9x,
  data written before is intact, and the attack's own promise (connection closed, new
  client served, partitions created within the limits ...).
Figures are medians over the runs. A broker whose RSS runs --kill-margin MiB past its
bound is killed by a watchdog (the peak is then at least that figure).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from bench.harness import Samples, bench_parser, load_average, log
from harness.attack_catalogue import SCENARIOS
from harness.attacks import Measurement, MiB, Scenario, measure


def run_all(
    scenarios: list[Scenario],
    runs: int,
    kill_margin: int,
    log: Callable[[str], None],
    against: str = "minibroker",
) -> tuple[Samples, dict[str, list[Measurement]]]:
    samples = Samples()
    results: dict[str, list[Measurement]] = {s.name: [] for s in scenarios}
    for run in range(runs):
        for scenario in scenarios:
            log(f"run {run + 1}/{runs}: {scenario.name}")
            started = time.perf_counter()
            m = measure(scenario, kill_margin=kill_margin, against=against)
            log(f"  {time.perf_counter() - started:.1f} s  " + m.describe().replace("\n", "\n  "))
            results[scenario.name].append(m)
            samples.add("baseline", scenario.name, m.baseline.wall)
            for key, rate in (("during", m.during), ("after", m.after)):
                ratios = m.ratios(rate)
                if ratios is not None:
                    samples.add(key, scenario.name, ratios[0])
                    samples.add(f"{key}_cpu", scenario.name, ratios[1])
            samples.add("growth", scenario.name, m.growth / MiB)
            samples.add("stored", scenario.name, m.stored_bytes / MiB)
    return samples, results


def _ratio(samples: Samples, key: str, name: str) -> str:
    wall, cpu = samples.median(key, name), samples.median(f"{key}_cpu", name)
    return "-" if wall is None or cpu is None else f"{wall:.2f}x / {cpu:.2f}x"


def table(samples: Samples, results: dict[str, list[Measurement]]) -> list[str]:
    lines = [
        "| attack | baseline honest rate | during (wall / per CPU) | after (wall / per CPU) "
        "| peak RSS - baseline | stored | targets hold |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, measurements in results.items():
        failed = sum(bool(m.failures()) for m in measurements)
        held = "yes" if not failed else f"**no** ({failed}/{len(measurements)} runs)"
        baseline = samples.median("baseline", name) or 0.0
        growth = samples.median("growth", name) or 0.0
        stored = samples.median("stored", name) or 0.0
        lines.append(
            f"| {name} | {baseline:,.0f} msg/s | {_ratio(samples, 'during', name)} "
            f"| {_ratio(samples, 'after', name)} | {growth:,.0f} MiB "
            f"| {stored:,.1f} MiB | {held} |"
        )
    return lines


def notes(results: dict[str, list[Measurement]]) -> list[str]:
    lines: list[str] = []
    for name, measurements in results.items():
        last = measurements[-1]
        facts = "; ".join(last.facts)
        failures = sorted({f for m in measurements for f in m.failures()})
        if facts or failures:
            lines.append(f"- {name}: {facts}")
            lines += [f"  - not held: {failure}" for failure in failures]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(
        "hostile", __doc__, "one run per attack", "runs per attack (default 3, quick 1)"
    )
    parser.add_argument(
        "--slow", action="store_true", help="include the default-settings lock-out (~40 s)"
    )
    parser.add_argument("--only", help="only attacks whose name contains this text")
    parser.add_argument(
        "--against",
        choices=("minibroker", "kafka-jvm"),
        default="minibroker",
        help="the attacked broker: minibroker, or Apache Kafka 4.x from its jars for "
        "reference (attacks without a counterpart there are left out)",
    )
    parser.add_argument(
        "--kill-margin",
        type=int,
        default=3072,
        metavar="MIB",
        help="kill the broker this far past its memory bound (default 3072 MiB)",
    )
    args = parser.parse_args(argv)
    runs = max(1, args.runs or (1 if args.quick else 3))
    scenarios = [
        s
        for s in SCENARIOS
        if (args.slow or not s.slow)
        and (args.only is None or args.only in s.name)
        and (args.against == "minibroker" or s.kafka_settings is not None)
    ]
    if not scenarios:
        parser.error("no attack matches")

    load_before = load_average()
    started = time.perf_counter()
    samples, results = run_all(scenarios, runs, args.kill_margin * MiB, log, args.against)
    elapsed = time.perf_counter() - started
    print(
        f"`python -m bench.hostile`, {runs} run(s) per attack, {time.strftime('%Y-%m-%d')}, "
        f"{elapsed:.0f} s, load average {load_before} -> {load_average()}. Rates are the "
        "honest producer's (one message per request, acks=1) as ratios of its rate before "
        "the attack; medians over the runs."
    )
    print()
    print("\n".join(table(samples, results)))
    print()
    print("\n".join(notes(results)))
    held = all(not m.failures() for ms in results.values() for m in ms)
    print(f"\nall targets hold: {'yes' if held else 'no'}")
    spread = [
        statistics.pstdev([m.baseline_rate for m in ms])
        / max(1.0, statistics.mean([m.baseline_rate for m in ms]))
        for ms in results.values()
        if len(ms) > 1
    ]
    if spread:
        print(f"baseline rate spread across runs: {statistics.median(spread):.0%} (median CV)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
