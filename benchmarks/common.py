"""Shared benchmark helpers: timing, medians and ratios, machine facts, results JSON, tables.

Importing this module never imports TensorFlow (the start-up benchmark relies on it).
Every benchmark writes ``<results dir>/<name>.json``::

    {"name", "date", "quick", "machine", "commit", "headline": [[measure, value], ...],
     "figures": {...}}

`headline` holds the few rows `run_all` puts in the README table.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainer import precision

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"
QUICK_RESULTS_DIR = RESULTS_DIR / "quick"
# TensorFlow's start-up chatter is noise in benchmark output (set before it is imported).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def median(values: Iterable[float]) -> float:
    """Median of `values` (raises ValueError when empty)."""
    values = list(values)
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


def ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, or None when the denominator is 0."""
    return float(numerator) / float(denominator) if denominator else None


def steady(values: Sequence[float], warmup: int = 1) -> list[float]:
    """`values` without the first `warmup` ones (all of them when that would leave none)."""
    return list(values[warmup:]) or list(values)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Run `fn`; return (seconds it took, its result)."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's children that have ended and been waited for.

    The difference around a `run_command` is that command's CPU time: the work it did,
    which, unlike its wall time, does not grow while it waits or stands idle.
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def repeat(fn: Callable[[], Any], repeats: int, warmup: int = 0) -> list[float]:
    """Seconds of `repeats` calls of `fn`, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    return [timed(fn)[0] for _ in range(repeats)]


def run_command(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    timeout: float = 3600,
    check: bool = True,
) -> tuple[float, subprocess.CompletedProcess]:
    """Run a command to completion, capturing its output; return (wall seconds, process).

    Raises:
        RuntimeError: With `check`, the command exited non-zero (its output's tail says why).
    """
    start = time.perf_counter()
    process = subprocess.run(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    seconds = time.perf_counter() - start
    if check and process.returncode:
        tail = (process.stdout + process.stderr)[-3000:]
        raise RuntimeError(f"{' '.join(argv)} exited {process.returncode}:\n{tail}")
    return seconds, process


def bench_env(**extra: str) -> dict[str, str]:
    """This environment, quiet TensorFlow, no cluster variables leaking in, plus `extra`."""
    drop = ("TF_CONFIG", "CLUSTER_SPEC", "HPT_LOGICAL_DEVICES")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", **extra})
    return env


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


# CPU flags that change the figures: TensorFlow's oneDNN kernels use AVX2 / AVX-512, and
# bfloat16 (`--precision mixed_bfloat16`) is fast only with AVX512-BF16 or AMX units (3.5x the
# seeds' trainer on such a host, 0.56-0.64x on an AVX2-only one, same commit).
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8")
ONEDNN_SETTINGS = (precision.ONEDNN_SWITCH, *precision.ONEDNN_ISA_CAPS)
CPUINFO = Path("/proc/cpuinfo")


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """The CPU model and which of `CPU_FLAGS` it has, from the text of `/proc/cpuinfo`.

    Reads the first processor's block (`model name`, `flags`); `cpu_flags` is None when the
    text lists no flags at all (not x86, or not readable), so "unknown" differs from "none".
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the end of the first processor's block
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    flags = fields.get("flags")
    present = set(flags.split()) if flags is not None else None
    return {
        "cpu_model": fields.get("model name") or fields.get("hardware") or None,
        "cpu_flags": None if present is None else [f for f in CPU_FLAGS if f in present],
    }


def cpu() -> dict[str, Any]:
    """`parse_cpuinfo` of this machine (model from `platform` where there is no cpuinfo)."""
    try:
        found = parse_cpuinfo(CPUINFO.read_text(errors="replace"))
    except OSError:
        found = {"cpu_model": None, "cpu_flags": None}
    found["cpu_model"] = found["cpu_model"] or platform.processor() or platform.machine()
    return found


def describe_cpu(m: Mapping[str, Any]) -> str:
    """`Intel(R) Xeon(R) Processor (avx2 avx512_bf16 amx_bf16 …)` from a machine record."""
    model = m.get("cpu_model") or m.get("processor") or "unknown CPU"
    flags = m.get("cpu_flags")
    settings = "".join(f", {name}={value}" for name, value in (m.get("onednn") or {}).items())
    if flags is None:
        return f"{model} (flags unknown{settings})"
    return f"{model} ({' '.join(flags) if flags else 'none of ' + ', '.join(CPU_FLAGS)}{settings})"


def machine() -> dict[str, Any]:
    """Where the figures were taken (no TensorFlow import: versions come from the metadata)."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        **cpu(),
        # What oneDNN is told (off, or its instruction set capped) changes the figures as
        # much as the flags: `ONEDNN_MAX_CPU_ISA=AVX2` runs this host as an AVX2-only one.
        "onednn": {name: os.environ[name] for name in ONEDNN_SETTINGS if name in os.environ},
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": load,
        "tensorflow": _version("tensorflow-cpu") or _version("tensorflow"),
        "keras": _version("keras"),
    }


def git_commit() -> str:
    """The checked-out commit (short), with ``+dirty`` when the tree has changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}+dirty" if dirty else commit


def write_result(
    name: str,
    figures: Mapping[str, Any],
    *,
    headline: Sequence[Sequence[str]],
    quick: bool,
    results_dir: Path | str | None = None,
) -> Path:
    """Write one benchmark's results as JSON; return the file's path."""
    directory = Path(results_dir) if results_dir else (QUICK_RESULTS_DIR if quick else RESULTS_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    document = {
        "name": name,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "machine": machine(),
        "commit": git_commit(),
        "headline": [[str(cell) for cell in row] for row in headline],
        "figures": figures,
    }
    path = directory / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2, default=_jsonable) + "\n")
    tmp.replace(path)
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def read_result(path: Path | str) -> dict[str, Any]:
    """Load a results file written by `write_result`."""
    return json.loads(Path(path).read_text())


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print a Rich table (first column left-aligned, the others right-aligned)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    for row in rows:
        table.add_row(*(str(cell) for cell in row))
    Console(file=sys.stdout).print(table)


def fmt(value: float | None, spec: str = ".3g", suffix: str = "") -> str:
    """Format a figure for a table; '-' for None."""
    return "-" if value is None else f"{value:{spec}}{suffix}"


def base_parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark takes (`--quick`, `--results-dir`)."""
    parser = argparse.ArgumentParser(
        description=(doc or "").strip().splitlines()[0] if doc else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny settings: checks the script, not the machine"
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help=f"where to write <name>.json (default {RESULTS_DIR.relative_to(ROOT)}, "
        f"{QUICK_RESULTS_DIR.relative_to(ROOT)} with --quick)",
    )
    return parser


def finish(
    name: str,
    figures: Mapping[str, Any],
    headline: Sequence[Sequence[str]],
    args: argparse.Namespace,
) -> Path:
    """Write the results, print the headline table and where the JSON went."""
    path = write_result(
        name, figures, headline=headline, quick=args.quick, results_dir=args.results_dir
    )
    print_table(f"{name}{' (quick)' if args.quick else ''}", ["measure", "value"], headline)
    print(f"wrote {path}")
    return path
