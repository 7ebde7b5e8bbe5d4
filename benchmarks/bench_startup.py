"""Start-up benchmark (issue 8, item 5): `hpt-pipeline --help` and `compile`, without TensorFlow.

Times, as fresh processes (median of `--repeats`, after one untimed warm-up run
that fills the bytecode cache):

* ``hpt-pipeline --help``;
* ``hpt-pipeline compile --target vertex --output <tmp>/pipeline.yaml``;
* for scale, ``python -c 'import tensorflow'``.

And checks that neither command imports TensorFlow: each runs once more in a
process that runs the CLI in-process and then reports whether ``tensorflow`` (or
``keras``) is in ``sys.modules``.

Usage: ``python -m benchmarks.bench_startup [--quick]``. Writes ``benchmarks/results/startup.json``.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "startup"
CLI = Path(sys.executable).with_name("hpt-pipeline")
HEAVY = ("tensorflow", "keras")
# `-X importtime` lines: "import time: <self us> | <cumulative us> | <indented module>".
_IMPORT_TIME = re.compile(r"^import time:\s+(\d+) \|\s+\d+ \|(.*)$")
# Runs the CLI in this process, then prints which heavy modules it imported.
_PROBE = """
import json, sys
from pipelines.app.cli import main
sys.argv = ["hpt-pipeline", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("IMPORTED " + json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


# `compile --target vertex` refuses placeholder images; the timed commands get pushed-looking ones.
IMAGES = {
    "HPT_TRAINER_IMAGE": "registry.example/hpt/trainer:bench",
    "HPT_COMPONENTS_IMAGE": "registry.example/hpt/components:bench",
}


def commands(workdir: Path) -> dict[str, list[str]]:
    """The timed command lines (CLI arguments after the program name)."""
    return {
        "help": ["--help"],
        "compile_vertex": [
            "compile",
            "--target",
            "vertex",
            "--output",
            str(workdir / "pipeline.yaml"),
        ],
    }


def probe_imports(cli_args: list[str]) -> tuple[list[str], dict[str, float]]:
    """Run the CLI with `cli_args` under ``-X importtime``.

    Returns:
        The heavy modules (TensorFlow, Keras) it imported, and the packages whose
        imports took longest (`top_imports`).
    """
    probe = _PROBE.format(heavy=repr(HEAVY))
    _, process = common.run_command(
        [sys.executable, "-X", "importtime", "-c", probe, *cli_args],
        env=common.bench_env(**IMAGES),
        check=False,
    )
    lines = [line for line in process.stdout.splitlines() if line.startswith("IMPORTED ")]
    if not lines:
        raise RuntimeError(f"import probe printed nothing:\n{process.stdout}{process.stderr}")
    return json.loads(lines[-1].removeprefix("IMPORTED ")), top_imports(process.stderr)


def top_imports(importtime: str, count: int = 6) -> dict[str, float]:
    """Where import time goes in ``-X importtime`` output: root package → summed self seconds."""
    totals: dict[str, float] = {}
    for line in importtime.splitlines():
        match = _IMPORT_TIME.match(line)
        if match:
            root = match[2].strip().split(".")[0]
            totals[root] = totals.get(root, 0.0) + int(match[1]) / 1e6
    slowest = sorted(totals.items(), key=lambda kv: -kv[1])[:count]
    return {name: round(seconds, 3) for name, seconds in slowest}


def time_command(argv: list[str], repeats: int) -> list[float]:
    """Wall seconds of `repeats` runs of `argv`, after one untimed warm-up run."""
    env = common.bench_env(**IMAGES)
    common.run_command(argv, env=env)
    return [common.run_command(argv, env=env)[0] for _ in range(repeats)]


def main(argv: list[str] | None = None) -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--skip-tensorflow", action="store_true", help="do not time `import tensorflow`"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.skip_tensorflow = 1, True
    figures: dict[str, Any] = {"repeats": args.repeats, "commands": {}}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for name, cli_args in commands(Path(tmp)).items():
            runs = time_command([str(CLI), *cli_args], args.repeats)
            heavy, slowest = probe_imports(cli_args)
            figures["commands"][name] = {
                "argv": ["hpt-pipeline", *cli_args[:3]],
                "median_seconds": round(common.median(runs), 3),
                "runs": [round(r, 3) for r in runs],
                "imports": heavy,
                "slowest_imports_seconds": slowest,
            }
    if not args.skip_tensorflow:
        runs = time_command([sys.executable, "-c", "import tensorflow"], args.repeats)
        figures["import_tensorflow_seconds"] = round(common.median(runs), 3)
    figures["tensorflow_free"] = all(not c["imports"] for c in figures["commands"].values())
    rows = [
        [
            f"start-up: hpt-pipeline {' '.join(c['argv'][1:])} (s)",
            f"{c['median_seconds']:.2f}"
            + (f" (imports {', '.join(c['imports'])}!)" if c["imports"] else ", no TensorFlow"),
        ]
        for c in figures["commands"].values()
    ]
    if "import_tensorflow_seconds" in figures:
        rows.append(
            [
                "start-up: python -c 'import tensorflow' (s)",
                f"{figures['import_tensorflow_seconds']:.2f}",
            ]
        )
    for name, command in figures["commands"].items():
        print(f"{name}: imports {command['imports'] or 'no TensorFlow / Keras'}; slowest imports")
        for package, seconds in command["slowest_imports_seconds"].items():
            print(f"  {package}: {seconds:.2f} s")
    common.finish(NAME, figures, rows, args)
    if not figures["tensorflow_free"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
