"""mutmut over chosen modules, with only the test files that cover them, in a copy.

`make mutmut MODULES="pipelines/study/selection.py pipelines/jobs/machines.py"` (or
`.venv/bin/python tests/mutmut_run.py MODULE ... [--jobs N] [--keep]`; `--list` shows the
modules and their test files). The project's files (tracked, and untracked ones git does not
ignore) are copied to `runs/mutmut/<modules' digest>/`; the copy's `pyproject.toml` gets a
`[tool.mutmut]` section (the packages as `source_paths`, the modules as `only_mutate`, their
test files from `COVERING` as `pytest_add_cli_args_test_selection`); `mutmut run` runs
there, with `PWD` and `PYTHONPATH` set to its `mutants/` folder so that the processes the
tests start (trainer runs, studies) import the mutated code too. It prints each module's
score and every surviving mutant's name (`cd runs/mutmut/... && mutmut show NAME`).

mutmut (3.x) finds which tests reach a mutated function by recording calls in the pytest
process; a function reached only from a process a test starts has "no tests" and is reported
as not covered, not as killed. Not collected by pytest (no `test_` prefix).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.mutants import ROOT, copy_project, project_files  # noqa: E402

MUTMUT = ROOT / ".venv" / "bin" / "mutmut"
PACKAGES = ("pipelines", "trainer", "dataprep", "components")
K = "tests/test_kubeflow_"
V = "tests/test_vertex_"
# Each module (or folder, ending in /) → the test files that cover it, cheapest first.
COVERING: dict[str, tuple[str, ...]] = {
    "pipelines/study/selection.py": ("tests/test_selection.py",),
    "pipelines/study/search_space.py": ("tests/test_search_space.py",),
    "pipelines/study/sampler.py": ("tests/test_local_study.py",),
    "pipelines/study/failure_rules.py": ("tests/test_failure_rules.py",),
    "pipelines/study/objectives.py": (
        "tests/test_objective_rules.py",
        "tests/test_pareto.py",
        "tests/test_behaviour_objectives.py",
    ),
    "pipelines/study/continuation.py": ("tests/test_continuation.py",),
    "pipelines/study/feature_plan.py": ("tests/test_features_pipeline.py",),
    "pipelines/study/interruption.py": ("tests/test_interruption.py",),
    "pipelines/app/study_identity.py": ("tests/test_run_ownership.py",),
    "pipelines/settings.py": ("tests/test_settings.py", "tests/test_behaviour_settings.py"),
    "pipelines/settings_space.py": ("tests/test_settings.py", "tests/test_models.py"),
    "pipelines/targets/kubeflow/katib_rules.py": (
        K + "katib.py",
        "tests/test_behaviour_kubeflow.py",
    ),
    "pipelines/targets/kubeflow/experiment.py": (
        K + "katib.py",
        "tests/test_behaviour_kubeflow.py",
        K + "cluster.py",
    ),
    "pipelines/targets/kubeflow/trial_template.py": (K + "katib.py", K + "manifests.py"),
    "pipelines/targets/kubeflow/tfjob.py": (K + "tfjob.py", K + "cluster.py"),
    "pipelines/targets/kubeflow/pod_watch.py": (K + "pod_watch.py",),
    "pipelines/targets/kubeflow/trainjob.py": (K + "trainjob.py", K + "trial_trainjob.py"),
    "pipelines/targets/kubeflow/job_kind.py": (K + "trial_trainjob.py",),
    "pipelines/targets/kubeflow/trial_trainjob.py": (K + "trial_trainjob.py",),
    "pipelines/targets/kubeflow/trainjob_checks.py": (K + "trial_trainjob.py", K + "trainjob.py"),
    "pipelines/targets/vertex/": (
        V + "client.py",
        V + "hpt_job.py",
        V + "run_checks.py",
        V + "types.py",
        "tests/test_registry_and_vertex_trials.py",
    ),
    "pipelines/jobs/machines.py": ("tests/test_worker_pools.py", V + "run_checks.py"),
    "pipelines/jobs/worker_pools.py": ("tests/test_worker_pools.py",),
    "trainer/models/": ("tests/test_models.py",),
    "trainer/evaluate.py": ("tests/test_eval_report.py",),
    "dataprep/": ("tests/test_prepare.py", "tests/test_behaviour_data.py"),
}
# Cheapest and most valuable first: what `make mutmut` runs with no MODULES.
DEFAULT = (
    "pipelines/study/selection.py",
    "pipelines/study/failure_rules.py",
    "pipelines/jobs/machines.py",
    "pipelines/jobs/worker_pools.py",
)


def covering(module: str) -> tuple[str, ...]:
    """The test files for `module` (a file, or a folder it is in); exit when none is known."""
    for key, tests in COVERING.items():
        if module == key or (key.endswith("/") and module.startswith(key)):
            return tests
    sys.exit(f"mutmut_run: {module}: no test files known for it (add it to COVERING)")


def mutmut_section(modules: Sequence[str], tests: Sequence[str]) -> str:
    """The `[tool.mutmut]` TOML section for `modules` and `tests`."""
    only = [m + "*" if m.endswith("/") else m for m in modules]
    return (
        "\n[tool.mutmut]\n"
        f"source_paths = {json.dumps(list(PACKAGES))}\n"
        f"only_mutate = {json.dumps(only)}\n"
        f"also_copy = {json.dumps(also_copied())}\n"
        f"pytest_add_cli_args = {json.dumps(['-p', 'no:randomly', '-p', 'no:cacheprovider'])}\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(list(tests))}\n"
        "use_git_change_detection = false\n"
    )


def also_copied() -> list[str]:
    """Top-level entries beside the packages (the tests read docs, images, benchmarks)."""
    tops = {p.split("/")[0] for p in project_files()}
    return sorted(tops - set(PACKAGES))


def scores(folder: Path) -> dict[str, collections.Counter[str]]:
    """Mutant outcomes per mutated file, from `mutmut results --all true`."""
    out = subprocess.run(
        [str(MUTMUT), "results", "--all", "true"],
        cwd=folder,
        capture_output=True,
        text=True,
        env=environment(folder),
    ).stdout
    per: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in out.splitlines():
        name, _, outcome = line.strip().rpartition(": ")
        if not name or "__mutmut_" not in name:
            continue
        module = name.rsplit(".", 1)[0]  # mutmut names a mutant module.x_function__mutmut_N
        per[module][outcome.strip()] += 1
        per[module]["total"] += 1
        if outcome.strip() != "killed":
            per[module][f"names: {name} ({outcome.strip()})"] += 1
    return per


def environment(folder: Path) -> dict[str, str]:
    mutants = str(folder / "mutants")
    env = {**os.environ, "PWD": mutants, "PYTHONPATH": mutants}
    env.pop("OLDPWD", None)
    env.pop("MUTANT_UNDER_TEST", None)
    return env


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"default: {' '.join(DEFAULT)}")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--list", action="store_true", help="list the modules and their tests")
    parser.add_argument("--keep", action="store_true", help="reuse the folder's earlier results")
    parser.add_argument("--debug", action="store_true", help="mutmut's debug output, in the log")
    args = parser.parse_args(argv)
    if args.list:
        for module, tests in COVERING.items():
            print(f"{module:48} {' '.join(tests)}")
        return 0
    modules = args.modules or list(DEFAULT)
    for module in modules:
        if not (ROOT / module).exists():
            sys.exit(f"mutmut_run: {module}: no such module or folder (expected a path)")
    tests = list(dict.fromkeys(t for m in modules for t in covering(m)))
    digest = hashlib.sha256(" ".join(modules).encode()).hexdigest()[:10]
    folder = ROOT / "runs" / "mutmut" / digest
    if folder.exists() and not args.keep:
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    copy_project(folder, project_files())
    with open(folder / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write(mutmut_section(modules, tests) + ("debug = true\n" if args.debug else ""))
    # On PYTHONPATH before mutmut fills it: a folder missing when Python starts is never searched.
    (folder / "mutants").mkdir(exist_ok=True)
    print(f"mutmut over {' '.join(modules)}\n  tests: {' '.join(tests)}\n  in {folder}", flush=True)
    started = time.monotonic()
    done = subprocess.run(
        [str(MUTMUT), "run", "--max-children", str(args.jobs)],
        cwd=folder,
        env=environment(folder),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seconds = time.monotonic() - started
    (folder / "mutmut-run.log").write_text(done.stdout)
    if done.returncode:
        print(done.stdout[-3000:])
        print(f"mutmut run failed (exit {done.returncode}) after {seconds:.0f}s")
        return done.returncode
    total = collections.Counter[str]()
    for module, counts in sorted(scores(folder).items()):
        killed, all_ = counts["killed"], counts["total"]
        total.update({"killed": killed, "total": all_})
        other = ", ".join(
            f"{k} {v}"
            for k, v in sorted(counts.items())
            if k not in ("killed", "total") and not k.startswith("names: ")
        )
        rate = 100 * killed / max(all_, 1)
        print(f"{module:55} {killed:4}/{all_:<4} killed ({rate:5.1f} %)  {other}")
        for key in sorted(k for k in counts if k.startswith("names: ")):
            print(f"    not killed: {key[len('names: ') :]}")
    rate = 100 * total["killed"] / max(total["total"], 1)
    print(f"\n{total['killed']}/{total['total']} mutants killed ({rate:.1f} %) in {seconds:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
