"""Planted one-line bugs, each in a temporary copy of the project, against the tests for it.

Run `make mutants` (or `.venv/bin/python tests/mutants.py [-k NAME] [--list]`). For each
mutant: the project's files (tracked, and untracked ones git does not ignore) are copied
to a temporary folder, the mutant's lines are replaced there, and the test files named
for it run with this checkout's interpreter, from the copy (cwd and `PYTHONPATH`), with
`-x -q`. It is *killed* when a test fails, *for the right reason* when the failing test
is the one named in `expect`. A mutant whose line is not found (the code moved on) is
reported as `missing`: fix its line here. Not collected by pytest (no `test_` prefix).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
B = "tests/test_behaviour_"


@dataclasses.dataclass(frozen=True)
class Mutant:
    """A bug: in `path`, each line reading `old` (indentation aside) becomes `new`."""

    name: str
    path: str
    edits: tuple[tuple[str, str], ...]
    tests: tuple[str, ...]  # test files or node ids, run in this order
    expect: str  # the failing test id must contain it
    timeout: float = 240.0


def m(name, path, old, new, tests, expect, timeout=240.0, more=()):
    """A `Mutant` of one edit (`more`: further (old, new) lines of the same bug)."""
    tests = (tests,) if isinstance(tests, str) else tuple(tests)
    return Mutant(name, path, ((old, new), *more), tests, expect, timeout)


MUTANTS = [
    # --- the model registry (issue 30) ---
    m(
        "the final job trains the default model",
        "pipelines/jobs/trainer_args.py",
        "return {name: values[name] for name in FIXED_TRAINER_SETTINGS}",
        'return {name: values[name] for name in FIXED_TRAINER_SETTINGS} | {"model": "cnn"}',
        "tests/test_pipeline_spec.py",
        "test_vertex_best_parameters_flow_into_the_final_multi_worker_job",
    ),
    m(
        "a team builder may shadow a trainer flag",
        "trainer/models/custom.py",
        "if p.name in TRAINER_HYPERPARAMETERS or p.name in RUN_FLAGS:",
        "if p.name in RUN_FLAGS:",
        "tests/test_models.py",
        "test_an_unusable_team_model_is_refused_in_one_line_before_a_run",
    ),
    m(
        "frozen blocks counted from the top",
        "trainer/models/backbones.py",
        "training = order[len(order) - blocks :] if blocks else []",
        "training = order[:blocks]",
        "tests/test_models.py",
        "test_trainable_blocks_train_the_top_of_the_backbone_only",
    ),
    # --- the eight survivors of issue 35 ---
    m(
        "1 labels numbered per split folder",
        "dataprep/sources.py",
        "for label, name in enumerate(class_names)",
        "for label, name in enumerate(sorted(by_class))",
        B + "data.py",
        "test_a_split_folder_lacking_a_class",
    ),
    m(
        "2 diverged trial reports 0.0 whatever the goal",
        "trainer/task.py",
        "worst = DIVERGED_METRIC_VALUE[METRIC_GOALS[run.metric_tag]]",
        'worst = DIVERGED_METRIC_VALUE["maximize"]',
        B + "trainer.py::test_a_diverging_loss_trial_reports_the_worst_loss",
        "test_a_diverging_loss_trial_reports_the_worst_loss",
    ),
    m(
        "3 optuna always maximizes",
        "pipelines/study/optuna_study.py",
        "directions=[str(m.goal) for m in space.metrics],  # type: ignore[misc]",
        'directions=["maximize" for m in space.metrics],  # type: ignore[misc]',
        B + "study.py",
        "test_a_loss_study_searches_toward_low_losses",
    ),
    m(
        "4 trial threshold never reaches selection",
        "components/select_best_trial.py",
        "threshold=float(threshold) if use_threshold else None,",
        "threshold=None,",
        B + "threshold.py",
        "test_a_study_below_the_trial_threshold_stops_before_the_final_training",
    ),
    m(
        "5 resume re-runs failed trials",
        "pipelines/study/local_study.py",
        "k for k, t in self.trials.items() if trials_lib.trial_state(t) == TrialState.ACTIVE",
        "k for k, t in self.trials.items() if trials_lib.trial_state(t) != TrialState.SUCCEEDED",
        B + "study.py::test_resume_never_reruns_a_failed_trial",
        "test_resume_never_reruns_a_failed_trial",
    ),
    m(
        "6 median rule's min_trials and warmup_steps swapped",
        "pipelines/study/optuna_study.py",
        "n_startup_trials=early_stopping.min_trials,",
        "n_startup_trials=early_stopping.warmup_steps,",
        B + "study.py::test_the_median_rule_waits_for_min_trials_then_judges_from_the_warmup_step",
        "test_the_median_rule_waits_for_min_trials",
        more=(
            (
                "n_warmup_steps=early_stopping.warmup_steps,",
                "n_warmup_steps=early_stopping.min_trials,",
            ),
        ),
    ),
    m(
        "7 fractions summing to 1 accepted",
        "pipelines/settings.py",
        "s.validation_fraction + s.test_fraction < 1,",
        "s.validation_fraction + s.test_fraction <= 1,",
        B + "settings.py",
        "test_each_bad_setting_is_refused",
    ),
    m(
        "8 katib maxFailedTrialCount > turned >=",
        "pipelines/targets/kubeflow/katib_rules.py",
        "if max_failed is not None and max_trials is not None and max_failed > max_trials:"
        "  # l.104-109",
        "if max_failed is not None and max_trials is not None and max_failed >= max_trials:"
        "  # l.104-109",
        B + "kubeflow.py",
        "test_small_studies_with_the_whole_budget_allowed_to_fail",
    ),
    # --- the weak tests of issue 35 ---
    m(
        "reported metric is the training one",
        "trainer/task.py",
        "metric_value=metrics[run.metric_tag],  # the tag is the history's key",
        'metric_value=metrics[run.metric_tag.replace("val_", "train_")],',
        B + "trainer.py::test_every_epoch_reports_the_validation_loss_not_the_training_loss",
        "test_every_epoch_reports_the_validation_loss",
    ),
    m(
        "model registry keyword misspelt",
        "pipelines/targets/kubeflow/model_registry.py",
        "model_format_version=MODEL_FORMAT[1],",
        "model_version=MODEL_FORMAT[1],",
        B + "kubeflow.py",
        "test_registration_calls_the_real_model_registry_signatures",
    ),
    m(
        "katib experiment name ignores the folder",
        "pipelines/targets/kubeflow/experiment.py",
        "digest = hashlib.sha256(base_output_directory.encode()).hexdigest()[:10]",
        "digest = hashlib.sha256(prefix.encode()).hexdigest()[:10]",
        B + "kubeflow.py",
        "test_names_differ_per_folder",
    ),
    m(
        "tfjob name differs between processes",
        "pipelines/targets/kubeflow/tfjob.py",
        "digest = hashlib.sha256(base_output_directory.encode()).hexdigest()[:10]",
        'digest = f"{hash(base_output_directory) & 0xFFFFFFFFFF:010x}"',
        B + "kubeflow.py",
        "test_names_differ_per_folder_and_are_the_same_in_a_fresh_process[tfjob]",
    ),
    # --- goal direction through the local path ---
    m(
        "best measurement of a loss trial is its highest",
        "pipelines/study/measurements.py",
        'sign = 1.0 if primary.goal == "maximize" else -1.0',
        "sign = 1.0",
        B + "study.py",
        "test_a_loss_trial_keeps_its_lowest_measurement",
    ),
    m(
        "selection always maximizes",
        "pipelines/study/selection.py",
        'sign = -1.0 if goal == "maximize" else 1.0',
        "sign = -1.0",
        ("tests/test_selection.py", B + "study.py"),
        "test_minimize",
    ),
    m(
        "loss threshold read as a lower bound",
        "pipelines/study/selection.py",
        'met = value >= threshold if goal == "maximize" else value <= threshold',
        "met = value >= threshold",
        B + "threshold.py",
        "test_a_study_below_the_trial_threshold_stops_before_the_final_training[val_loss",
    ),
    m(
        "pipeline never turns the trial threshold on",
        "pipelines/pipeline.py",
        "use_threshold=use_trial_threshold,",
        "use_threshold=False,",
        B + "threshold.py",
        "test_a_study_below_the_trial_threshold_stops_before_the_final_training",
    ),
    m(
        "local median rule defaults drift from Katib's",
        "pipelines/study/optuna_study.py",
        "min_trials: int = 3",
        "min_trials: int = 1",
        B + "study.py",
        "test_local_early_stopping_defaults_are_katibs_medianstop_settings",
    ),
    # --- failure budget and resume ---
    m(
        "failure budget allows one failure too many",
        "pipelines/study/failure_rules.py",
        "elif len(failed) >= max_failed_trial_count:",
        "elif len(failed) > max_failed_trial_count:",
        "tests/test_failure_rules.py",
        "test_the_study_fails_when_failures_reach_the_budget",
    ),
    m(
        "a cancelled trial eats the failure budget",
        "pipelines/study/failure_rules.py",
        "return trials_lib.trial_state(trial) == TrialState.INFEASIBLE"
        ' and not local.get("cancelled")',
        "return trials_lib.trial_state(trial) == TrialState.INFEASIBLE",
        "tests/test_failure_rules.py",
        "test_cancelled_and_diverged_trials_are_not_failures",
    ),
    m(
        "a resumed study replays the first run's draws",
        "pipelines/study/optuna_study.py",
        "effective_seed = None if seed is None else seed + len(trials)",
        "effective_seed = seed",
        B + "study.py::test_a_resumed_study_draws_new_values_not_the_first_runs_again",
        "test_a_resumed_study_draws_new_values",
    ),
    # --- the chief-only export rule ---
    m(
        "worker 0 is chief even beside a chief",
        "trainer/cluster.py",
        'return task_type == "worker" and task_id == 0 and "chief" not in cluster',
        'return task_type == "worker" and task_id == 0',
        "tests/test_cluster_and_export.py",
        "test_chief_rule",
    ),
    m(
        "every replica exports the model",
        "trainer/task.py",
        "if result.is_chief and run.model_dir:",
        "if run.model_dir:",
        "tests/test_trainer.py::test_two_process_multi_worker_only_chief_exports",
        "test_two_process_multi_worker_only_chief_exports",
        timeout=400.0,
    ),
    # --- start-up on CPU (issue 30) ---
    m(
        "Grappler is turned off where a GPU is visible",
        "trainer/distribute.py",
        'rewrites = bool(tf.config.list_physical_devices("GPU"))',
        "rewrites = False",
        "tests/test_gpu_visibility.py",
        "test_grappler_rewrites_only_where_a_gpu_is_visible_and_the_setting_found_comes_back",
    ),
    m(
        "a training run leaves Grappler off behind it",
        "trainer/distribute.py",
        'tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": found})',
        "pass",
        "tests/test_gpu_visibility.py",
        "the_setting_found_comes_back",
    ),
    m(
        "the export leaves BatchNorm's moving statistics out",
        "trainer/export.py",
        "self.model_variables = list(model.variables)",
        "self.model_variables = list(model.trainable_variables)",
        "tests/test_cluster_and_export.py",
        "test_a_batchnorm_model_serves_what_it_was_trained_to",
    ),
    # --- payload fields ---
    m(
        "final job's worker pool has one replica",
        "pipelines/jobs/worker_pools.py",
        "pools.append(_pool(replica_count=worker_count, **common))  # type: ignore[arg-type]",
        "pools.append(_pool(replica_count=1, **common))  # type: ignore[arg-type]",
        "tests/test_worker_pools.py",
        "test_final_job_is_a_chief_pool_and_a_worker_pool",
    ),
    m(
        "trials always report val_accuracy",
        "pipelines/jobs/trainer_args.py",
        "return {name: values[name] for name in FIXED_TRAINER_SETTINGS}",
        "return {name: values[name] for name in FIXED_TRAINER_SETTINGS}"
        ' | {"metric_tag": "val_accuracy"}',
        "tests/test_pipeline_spec.py::test_trial_job_spec_is_one_replica_running_the_trainer",
        "test_trial_job_spec_is_one_replica_running_the_trainer",
    ),
    # --- settings refusals at their edge ---
    m(
        "no failure allowed is refused",
        "pipelines/settings.py",
        'need(s.max_failed_trials >= 0, "max_failed_trials", "an integer >= 0")',
        'need(s.max_failed_trials > 0, "max_failed_trials", "an integer >= 0")',
        B + "settings.py",
        "test_the_last_valid_value_of_each_check_is_accepted",
    ),
    m(
        "all trials in parallel is refused",
        "pipelines/settings.py",
        "1 <= s.parallel_trials <= s.max_trials,",
        "1 <= s.parallel_trials < s.max_trials,",
        B + "settings.py",
        "test_the_last_valid_value_of_each_check_is_accepted",
    ),
    m(
        "a kubeflow timeout below a minute is accepted",
        "pipelines/settings.py",
        'need(s.kubeflow_timeout_s >= 60, "kubeflow_timeout_s", "an integer >= 60 (seconds)")',
        'need(s.kubeflow_timeout_s >= 0, "kubeflow_timeout_s", "an integer >= 60 (seconds)")',
        B + "settings.py",
        "test_each_bad_setting_is_refused",
    ),
    # --- the frozen backbone's feature cache (issue 39) ---
    m(
        "a trial whose whole network trains is cached",
        "trainer/feature_keys.py",
        "return blocks > 0 and 0 <= int(trainable_blocks) < blocks",
        "return blocks > 0 and 0 <= int(trainable_blocks) <= blocks",
        "tests/test_features.py",
        "test_cacheable_values_leave_out_the_whole_network_and_models_without_blocks",
    ),
    m(
        "an entry with other keys is reused",
        "trainer/feature_store.py",
        "differ = feature_keys.mismatches(expected, metadata)",
        "differ: list[str] = []",
        "tests/test_features.py",
        "test_a_changed_weights_file_or_precision_recomputes",
    ),
    m(
        "the cut is one block too low",
        "trainer/frozen.py",
        "frozen = set(order[:depth])",
        "frozen = set(order[: depth - 1])",
        "tests/test_features.py",
        "test_the_cut_at_every_depth_is_exact_and_its_shape_is_the_tables",
    ),
    m(
        "the budget is ignored",
        "trainer/features.py",
        "if max_bytes and estimate > max_bytes:",
        "if max_bytes and estimate < max_bytes:",
        "tests/test_features.py",
        "test_features_over_the_budget_are_refused_in_one_line",
    ),
    m(
        "cached features shuffled in another order than the images",
        "trainer/feature_store.py",
        "d.shuffle(data.SHUFFLE_BUFFER, seed=seed + context.input_pipeline_id)",
        "d.shuffle(data.SHUFFLE_BUFFER, seed=seed + 1 + context.input_pipeline_id)",
        "tests/test_feature_training.py",
        "test_a_cached_trial_trains_as_from_images_and_exports_the_whole_model",
    ),
    m(
        "the export of a frozen-backbone trial keeps the untrained head",
        "trainer/stages.py",
        "model.get_layer(name).set_weights(head.get_layer(name).get_weights())",
        "model.get_layer(name).get_weights()",
        "tests/test_feature_training.py",
        "test_a_cached_trial_trains_as_from_images_and_exports_the_whole_model",
    ),
]


def project_files() -> list[str]:
    """Paths to copy: tracked files and untracked ones git does not ignore."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def copy_project(dest: Path, files: list[str]) -> None:
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)


def plant(copy: Path, mutant: Mutant) -> str | None:
    """Apply the mutant's edits in `copy`; a reason when a line is not found exactly once."""
    path = copy / mutant.path
    lines = path.read_text().splitlines(keepends=True)
    for old, new in mutant.edits:
        hits = [i for i, line in enumerate(lines) if line.strip() == old.strip()]
        if len(hits) != 1:
            return f"{len(hits)} lines read {old!r} in {mutant.path}"
        line = lines[hits[0]]
        indent = line[: len(line) - len(line.lstrip())]
        lines[hits[0]] = indent + new.strip() + "\n"
    path.write_text("".join(lines))
    return None


def environment(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_copy_runs(copy: Path) -> None:
    """The copy's modules, not the checkout's, are the ones imported there (else exit)."""
    code = (
        "import dataprep, pipelines, trainer, tests.conftest as c;"
        "print(pipelines.__file__, dataprep.__file__, trainer.__file__, c.ROOT)"
    )
    out = subprocess.run(
        [str(PYTHON), "-c", code], cwd=copy, env=environment(copy), capture_output=True, text=True
    )
    where = out.stdout.split()
    if out.returncode or not where or not all(w.startswith(str(copy)) for w in where):
        sys.exit(f"mutants: the copy's code does not run from the copy: {out.stdout}{out.stderr}")


_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def run_mutant(mutant: Mutant, files: list[str]) -> tuple[str, str, float]:
    """(outcome, detail, seconds): killed / killed-other / survived / missing / timeout / error."""
    with tempfile.TemporaryDirectory(prefix="mutant-") as folder:
        copy = Path(folder) / "project"
        copy_project(copy, files)
        check_copy_runs(copy)
        problem = plant(copy, mutant)
        if problem:
            return "missing", problem, 0.0
        command = [str(PYTHON), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
        started = time.monotonic()
        try:
            done = subprocess.run(
                [*command, *mutant.tests],
                cwd=copy,
                env=environment(copy),
                capture_output=True,
                text=True,
                timeout=mutant.timeout,
            )
        except subprocess.TimeoutExpired:
            return "timeout", f"over {mutant.timeout:.0f}s", time.monotonic() - started
        seconds = time.monotonic() - started
    failed = _FAILED.findall(done.stdout)
    if done.returncode == 0:
        return "survived", "all passed", seconds
    if done.returncode != 1 or not failed:
        return "error", f"pytest exit {done.returncode}: {done.stdout[-300:]}", seconds
    outcome = "killed" if mutant.expect in failed[0] else "killed-other"
    why = next((line[1:].strip() for line in done.stdout.splitlines() if line.startswith("E ")), "")
    return outcome, f"{failed[0]}\n{'':23}{why[:150]}", seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only mutants whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    chosen = [x for x in MUTANTS if args.k in x.name]
    if args.list:
        for x in chosen:
            print(f"{x.name}  [{x.path}]  {x.edits[0][0]!r} -> {x.edits[0][1]!r}  ({x.expect})")
        return 0
    files = project_files()
    results = []
    for x in chosen:
        outcome, detail, seconds = run_mutant(x, files)
        results.append(outcome)
        print(f"{outcome:13} {seconds:6.1f}s  {x.name}  [{x.path}]  <- {detail}", flush=True)
    right = results.count("killed")
    killed = right + results.count("killed-other") + results.count("timeout")
    rate = 100 * right / max(len(results), 1)
    print(
        f"\n{right}/{len(results)} killed for the right reason ({rate:.0f} %), "
        f"{killed}/{len(results)} killed at all"
    )
    return 0 if right == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
