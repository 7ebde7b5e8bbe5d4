"""Run every benchmark, one process each, and regenerate the results table in the README.

``python -m benchmarks.run_all`` (``make bench``): full settings, results in
``benchmarks/results/``, table in ``benchmarks/README.md`` between the
``results:begin`` / ``results:end`` markers. ``--quick`` (``make bench-quick``):
tiny settings that check the scripts, results in ``benchmarks/results/quick/``,
README untouched unless ``--readme``. A benchmark that fails is reported and the
others still run; the exit status is then 1.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import common

# Name (= results file) → module, in the order they run (cheap first).
BENCHMARKS = {
    "equal_work": "benchmarks.bench_equal_work",
    "startup": "benchmarks.bench_startup",
    "hpt": "benchmarks.bench_hpt",
    "data_wait": "benchmarks.bench_data_wait",
    "trainer": "benchmarks.bench_trainer",
    "gpu": "benchmarks.bench_gpu",
    "pipeline": "benchmarks.bench_pipeline",
}
TITLES = {
    "equal_work": "0. equal work, whole process",
    "startup": "5. start-up",
    "hpt": "4. HPT efficiency",
    "data_wait": "2. input pipeline",
    "trainer": "1. trainer vs the seeds'",
    "gpu": "6. devices",
    "pipeline": "3. local pipeline overhead",
}
README = common.ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def run(module: str, quick: bool, results_dir: Path | None) -> tuple[int, float]:
    """Run one benchmark with its output streaming through; return (exit code, seconds)."""
    argv = [sys.executable, "-m", module, *(["--quick"] if quick else [])]
    if results_dir:
        argv += ["--results-dir", str(results_dir)]
    start = time.perf_counter()
    code = subprocess.call(argv, cwd=common.ROOT, env=common.bench_env())
    return code, time.perf_counter() - start


def results_table(results: dict[str, dict[str, Any]]) -> str:
    """The README's results section: where and when, then one row per headline figure."""
    first = next(iter(results.values()))
    m = first["machine"]
    quick = any(r["quick"] for r in results.values())
    lines = [
        f"Machine: {m['platform']}, "
        f"{m['cpus']} CPUs: {common.describe_cpu(m)}, "
        f"load average before {m['load_average']}, Python {m['python']}, "
        f"TensorFlow {m['tensorflow']}, Keras {m['keras']}"
        + (
            " — **quick settings: these check the scripts, they are not figures**."
            if quick
            else "."
        ),
        "",
        "| benchmark | measure | value |",
        "|---|---|---|",
    ]
    for name, result in results.items():
        for measure, value in result["headline"]:
            cell = value.replace("|", "\\|")
            lines.append(f"| {TITLES.get(name, name)} | {measure.replace('|', '/')} | {cell} |")
    stamps = {name: f"{r['date'][:16]}Z `{r['commit']}`" for name, r in results.items()}
    lines += ["", "Runs (UTC, commit): " + "; ".join(f"{n} {s}" for n, s in stamps.items()) + "."]
    return "\n".join(lines)


def update_readme(table: str, readme: Path = README) -> None:
    """Replace the text between the results markers of the README with `table`."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise RuntimeError(f"{readme}: no {BEGIN} … {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")


def main(argv: list[str] | None = None) -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--only", nargs="+", choices=tuple(BENCHMARKS), help="run only these")
    parser.add_argument("--skip", nargs="+", choices=tuple(BENCHMARKS), default=[])
    readme = parser.add_mutually_exclusive_group()
    readme.add_argument("--readme", dest="readme", action="store_true", default=None)
    readme.add_argument("--no-readme", dest="readme", action="store_false")
    args = parser.parse_args(argv)
    names = [n for n in (args.only or BENCHMARKS) if n not in args.skip]
    directory = args.results_dir or (common.QUICK_RESULTS_DIR if args.quick else common.RESULTS_DIR)
    outcome = {}
    for name in names:
        print(
            f"\n=== {name} ({BENCHMARKS[name]}{' --quick' if args.quick else ''}) ===", flush=True
        )
        outcome[name] = run(BENCHMARKS[name], args.quick, args.results_dir)
    results = {
        name: common.read_result(directory / f"{name}.json")
        for name in BENCHMARKS
        if (directory / f"{name}.json").is_file() and outcome.get(name, (0,))[0] == 0
    }
    common.print_table(
        "benchmarks",
        ["benchmark", "exit", "seconds"],
        [[name, code, f"{seconds:.0f}"] for name, (code, seconds) in outcome.items()],
    )
    if results and (not args.quick if args.readme is None else args.readme):
        update_readme(results_table(results))
        print(f"updated {README}")
    if any(code for code, _ in outcome.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
