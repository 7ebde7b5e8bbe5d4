"""Planted one-line bugs, each in a temporary copy of the project, against the tests for it.

Run `make mutants` (or `.venv/bin/python tests/mutants.py [-k NAME ...] [--list]
[--preflight]`). For each mutant: the project's files (tracked, and untracked ones git does
not ignore) are copied to a temporary folder, the mutant's lines are replaced there, and the
test files named for it run with this checkout's interpreter, from the copy (cwd, `PWD` and
`PYTHONPATH`), with `-x -q`. It is *killed* when a test fails, *for the right reason* when
the failing test is the one named in `expect`. A mutant whose line is not found (the code
moved on) is reported as `missing`: fix its line here. `--preflight` first runs each named
test file alone in an unmutated copy: one that fails there would report false kills. Not
collected by pytest (no `test_` prefix).
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
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
    # --- objectives, constraints and the Pareto front (issue 40) ---
    m(
        "a table metric's goal is always maximize",
        "pipelines/study/objectives.py",
        "return Metric(name, METRIC_GOALS[name])",
        'return Metric(name, "maximize")',
        "tests/test_behaviour_objectives.py::test_a_minimised_primary_objective_is_picked_lowest_as_compiled",
        "test_a_minimised_primary_objective_is_picked_lowest_as_compiled",
    ),
    m(
        "name:min means maximize",
        "pipelines/study/objectives.py",
        'SUFFIX_GOALS = {"max": "maximize", "min": "minimize"}',
        'SUFFIX_GOALS = {"max": "maximize", "min": "maximize"}',
        "tests/test_pareto.py",
        "test_goals_come_from_the_one_table_or_the_suffix",
    ),
    m(
        "listed objectives do not make the primary the trainer's metric tag",
        "pipelines/settings.py",
        'if listed and values["metric_tag"] == DEFAULT_METRIC_TAG:  # the primary is the tag',
        "if False:",
        "tests/test_behaviour_objectives.py::test_a_minimised_primary_objective_is_picked_lowest_as_compiled",
        "test_a_minimised_primary_objective_is_picked_lowest_as_compiled",
    ),
    m(
        "early stopping is accepted with several objectives",
        "pipelines/study/objectives.py",
        "if early_stopping and len(parsed) > 1:  # Optuna and the median rule are 1-D",
        "if early_stopping and len(parsed) > 2:",
        "tests/test_behaviour_objectives.py::test_settings_refuse_in_one_line_before_anything_runs",
        "test_settings_refuse_in_one_line_before_anything_runs",
    ),
    m(
        "Optuna maximises every objective",
        "pipelines/study/optuna_study.py",
        "directions=[str(m.goal) for m in space.metrics],  # type: ignore[misc]",
        'directions=["maximize" for m in space.metrics],  # type: ignore[misc]',
        "tests/test_behaviour_objectives.py::test_optuna_gets_one_direction_per_objective",
        "test_optuna_gets_one_direction_per_objective",
    ),
    m(
        "every Vertex MetricSpec maximises",
        "pipelines/study/search_space.py",
        'return [{"metric_id": m.metric_id, "goal": GOAL_NUMBERS[m.goal]} for m in metrics]',
        'return [{"metric_id": m.metric_id, "goal": 1} for m in metrics]',
        "tests/test_behaviour_objectives.py::test_vertex_gets_one_metric_spec_per_objective_with_its_goal",
        "test_vertex_gets_one_metric_spec_per_objective_with_its_goal",
    ),
    m(
        "Katib's objective always maximises",
        "pipelines/targets/kubeflow/experiment.py",
        '"type": objective.goal,',
        '"type": "maximize",',
        "tests/test_behaviour_objectives.py::test_katib_objective_is_the_primary_with_the_others_as_additional_metrics",
        "test_katib_objective_is_the_primary_with_the_others_as_additional_metrics",
    ),
    m(
        "dominance ignores the goal",
        "pipelines/study/selection.py",
        'signs = [1.0 if g == "maximize" else -1.0 for g in goals]',
        "signs = [1.0 for g in goals]",
        "tests/test_pareto.py",
        "test_dominance_needs_no_worse_everywhere_and_better_once",
    ),
    m(
        "the pick ignores the front",
        "pipelines/study/selection.py",
        "best_id = min(front, key=key)",
        "best_id = min(feasible, key=key)",
        "tests/test_pareto.py",
        "test_a_tie_on_the_primary_goes_to_the_trial_that_dominates_before_the_cheaper_one",
    ),
    m(
        "a constraint's bound is read backwards",
        "pipelines/study/objectives.py",
        "return OPERATORS[self.op](value, self.bound)",
        "return OPERATORS[self.op](self.bound, value)",
        "tests/test_pareto.py",
        "test_a_constraint_excluding_the_most_accurate_picks_the_cheaper_tie_on_the_front",
    ),
    m(
        "the farthest trial is named the closest",
        "pipelines/study/selection.py",
        "closest = min(scored, key=lambda t: (_shortfall(scored[t][2], constraints), key(t)))",
        "closest = max(scored, key=lambda t: (_shortfall(scored[t][2], constraints), key(t)))",
        "tests/test_pareto.py",
        "test_no_trial_meets_the_constraints_names_the_closest",
    ),
    m(
        "a constraint on a metric no trial reports is accepted",
        "pipelines/study/objectives.py",
        "if name not in names:",
        "if False:",
        "tests/test_pareto.py",
        "test_bad_objectives_and_constraints_are_refused_in_one_line",
    ),
    m(
        "the trainer reports only its metric tag",
        "trainer/hypertune_report.py",
        "tags = sorted(set(METRIC_GOALS) & set(metrics), key=lambda t: t != self.metric_tag)",
        "tags = [t for t in (self.metric_tag,) if t in metrics]",
        "tests/test_kubeflow_katib.py::test_the_real_trainer_through_the_katib_trial_template",
        "test_the_real_trainer_through_the_katib_trial_template",
        timeout=400.0,
    ),
    m(
        "the compiled objectives pin the metric tag",
        "pipelines/settings_space.py",
        "return [] if objectives == (tag,) else list(objectives)",
        "return list(objectives)",
        "tests/test_vertex_run_checks.py",
        "test_submit_dry_run_refuses_a_bad_param_in_one_line",  # --param metric_tag=… alone
    ),
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
        "trainer/hypertune_report.py",
        "return DIVERGED_METRIC_VALUE[METRIC_GOALS[metric_tag]]",
        'return DIVERGED_METRIC_VALUE["maximize"]',
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
        "pipelines/targets/local/local_study.py",
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
        "pipelines/settings_sections.py",
        "self.validation_fraction + self.test_fraction < 1,",
        "self.validation_fraction + self.test_fraction <= 1,",
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
        "trainer/hypertune_report.py",
        "self.report(epoch, {tag: metrics[tag] for tag in tags})  # the tag is the history's key",
        'self.report(epoch, {tag: metrics[tag.replace("val_", "train_")] for tag in tags})',
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
        "pipelines/targets/kubeflow/kube.py",  # stable_name: the Experiment's and TFJob's rule
        "digest = hashlib.sha256(folder.encode()).hexdigest()[:10]",
        "digest = hashlib.sha256(prefix.encode()).hexdigest()[:10]",
        B + "kubeflow.py",
        "test_names_differ_per_folder",
    ),
    m(
        "tfjob name differs between processes",
        "pipelines/targets/kubeflow/kube.py",
        "digest = hashlib.sha256(folder.encode()).hexdigest()[:10]",
        'digest = f"{hash(folder) & 0xFFFFFFFFFF:010x}"',
        B + "kubeflow.py",
        "test_names_differ_per_folder_and_are_the_same_in_a_fresh_process",  # both use the rule
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
        'met = value >= threshold if primary.goal == "maximize" else value <= threshold',
        "met = value >= threshold",
        B + "threshold.py",
        "test_a_study_below_the_trial_threshold_stops_before_the_final_training[val_loss",
    ),
    m(
        "pipeline never turns the trial threshold on",
        "pipelines/pipeline.py",
        "use_threshold=p.use_trial_threshold,",
        "use_threshold=False,",
        B + "threshold.py",
        "test_a_study_below_the_trial_threshold_stops_before_the_final_training",
    ),
    m(
        "Katib's median rule drifts from the local one",
        "pipelines/targets/kubeflow/experiment.py",
        '"min_trials_required": str(MEDIAN_STOP_MIN_TRIALS),',
        '"min_trials_required": "1",',
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
        'return infeasible and not local.get("cancelled") and not trials_lib.is_diverged(trial)',
        "return infeasible and not trials_lib.is_diverged(trial)",
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
    m(
        "a trial found finished in its folder is retrained on resume",
        "pipelines/targets/local/local_study.py",
        "if kept is not None and (kept.state == TrialState.SUCCEEDED or kept.diverged):",
        "if False:",
        "tests/test_study_faults.py",
        "test_a_signal_between_a_trials_end_and_its_record_loses_nothing",
    ),
    m(
        "a rerun trial forgets what its earlier attempt reported",
        "pipelines/study/trial_runner.py",
        "by_step = {m.step: m for m in earlier}",
        "by_step = {}",
        "tests/test_study_faults.py",
        "test_a_trial_rerun_past_its_last_epoch_keeps_what_it_reported",
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
        "if result.is_chief and (run.model_dir or tuning):",
        "if run.model_dir or tuning:",
        "tests/test_trainer.py::test_two_process_multi_worker_only_chief_exports",
        "test_two_process_multi_worker_only_chief_exports",
        timeout=400.0,
    ),
    # --- multi-worker trials, trial_workers (issue 54) ---
    m(
        "every replica of a trial reports to hypertune",
        "trainer/task.py",
        "tuning = chief and hypertune_requested()",
        "tuning = hypertune_requested()",
        "tests/test_cluster_and_export.py::test_only_the_chief_of_a_multi_worker_trial_writes_the_hypertune_report",
        "test_only_the_chief_of_a_multi_worker_trial_writes_the_hypertune_report",
    ),
    m(
        "trials never get their workers",
        "pipelines/pipeline.py",
        "worker_count=p.trial_workers,",
        "worker_count=0,",
        "tests/test_vertex_hpt_job.py::test_compile_with_trial_workers_sends_every_trial_a_chief_pool_and_a_worker_pool",
        "test_compile_with_trial_workers_sends_every_trial_a_chief_pool_and_a_worker_pool",
    ),
    m(
        "the memory estimate counts one process per trial",
        "pipelines/targets/local/cli/preflight.py",
        "processes = settings.study.parallel_trials * (1 + settings.training.trial_workers)",
        "processes = settings.study.parallel_trials",
        "tests/test_run_ownership.py::test_a_trial_with_workers_counts_a_process_per_replica_in_the_memory_estimate",
        "test_a_trial_with_workers_counts_a_process_per_replica_in_the_memory_estimate",
    ),
    m(
        "kubeflow_trial_nodes is read as trial_workers",
        "pipelines/settings.py",
        'values["trial_workers"], values["kubeflow_trial_nodes"] = nodes - 1, None',
        'values["trial_workers"], values["kubeflow_trial_nodes"] = nodes, None',
        "tests/test_behaviour_settings.py::test_kubeflow_trial_nodes_is_read_as_trial_workers_plus_one_and_said_once",
        "test_kubeflow_trial_nodes_is_read_as_trial_workers_plus_one_and_said_once",
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
    # --- the survivors of issue 43 (realistic bugs nobody had chosen) ---
    m(
        "a team builder's Literal may mix strings and numbers",
        "trainer/models/custom.py",
        "if not all(isinstance(c, str) for c in choices):",
        "if not any(isinstance(c, str) for c in choices):",
        "tests/test_models.py::test_an_unusable_team_model_is_refused_in_one_line_before_a_run",
        "test_an_unusable_team_model_is_refused_in_one_line_before_a_run[teammodels.tiny:mixed",
    ),
    m(
        "a team builder's own min_image_size is ignored",
        "trainer/models/custom.py",
        'min_image_size=int(getattr(builder, "min_image_size", 1)),',
        "min_image_size=1,",
        "tests/test_models.py::test_a_team_models_own_min_image_size_refuses_smaller_images",
        "test_a_team_models_own_min_image_size_refuses_smaller_images",
    ),
    m(
        "gs:// weights reach Keras uncopied",
        "trainer/models/backbones.py",
        'if "://" not in weights:',
        "if weights:",
        "tests/test_models.py::test_weights_on_an_object_store_are_copied_locally_before_keras"
        "_reads_them",
        "test_weights_on_an_object_store_are_copied_locally",
    ),
    m(
        "layers without weights count as blocks",
        "trainer/models/backbones.py",
        "if layer.weights and block_of(layer.name) not in order:",
        "if block_of(layer.name) not in order:",
        "tests/test_models.py::test_mobilenet_trainable_blocks_13_trains_its_whole_backbone",
        "test_mobilenet_trainable_blocks_13_trains_its_whole_backbone",
    ),
    m(
        "ResNet50 gets images in [0, 1]",
        "trainer/models/resnet50.py",
        "to_backbone=lambda images: keras.applications.resnet50.preprocess_input(images * 255.0),",
        "to_backbone=lambda images: keras.applications.resnet50.preprocess_input(images),",
        "tests/test_models.py::test_resnet50_feeds_its_backbone_0_255_images_the_way_imagenet"
        "_weights_expect",
        "test_resnet50_feeds_its_backbone_0_255_images",
    ),
    m(
        "a weights file for cnn is accepted and ignored",
        "trainer/models/__init__.py",
        'if weights != "none" and not spec.pretrained:',
        'if weights == "imagenet" and not spec.pretrained:',
        "tests/test_models.py::test_a_weights_file_for_a_model_without_a_backbone_is_refused_not"
        "_ignored",
        "test_a_weights_file_for_a_model_without_a_backbone_is_refused_not_ignored",
    ),
    m(
        "resnet50 without --weights trains from scratch",
        "trainer/models/__init__.py",
        "weights = weights or spec.default_weights",
        'weights = weights or "none"',
        "tests/test_models.py::test_a_pretrained_model_without_weights_set_starts_from_imagenet",
        "test_a_pretrained_model_without_weights_set_starts_from_imagenet",
    ),
    m(
        "a dataset rewritten in place at the same sizes resumes the old study",
        "pipelines/plan.py",
        "entries.append((str(path.relative_to(root)), stat.st_size, stat.st_mtime_ns))",
        "entries.append((str(path.relative_to(root)), stat.st_size))",
        "tests/test_run_ownership.py",
        "test_an_image_rewritten_in_place_at_the_same_size_is_another_study",
    ),
    m(
        "the model is not part of the study's identity",
        "pipelines/app/study_identity.py",
        "values: dict[str, Any] = {name: settings.value(name) for name in STUDY_SETTINGS}",
        'values: dict[str, Any] = {n: settings.value(n) for n in STUDY_SETTINGS if n != "model"}',
        "tests/test_run_ownership.py",
        "test_another_model_over_the_same_search_space_is_another_study",
    ),
    m(
        "the run forwards SIGKILL to its steps",
        "pipelines/app/interrupts.py",
        "os.kill(pid, signal.SIGTERM)",
        "os.kill(pid, signal.SIGKILL)",
        "tests/test_interruption.py::test_a_stopped_run_tells_its_steps_with_sigterm_so_they_record"
        "_their_trials",
        "test_a_stopped_run_tells_its_steps_with_sigterm",
    ),
    m(
        "a trial killed just before the run dies counts as failed",
        "pipelines/study/interruption.py",
        "deadline = time.monotonic() + SIGNAL_DEATH_GRACE_S",
        "deadline = time.monotonic()",
        "tests/test_interruption.py::test_a_trial_killed_a_moment_before_the_run_dies_is_interrupted"
        "_not_failed",
        "test_a_trial_killed_a_moment_before_the_run_dies",
    ),
    m(
        "the confusion matrix is transposed",
        "trainer/evaluate.py",
        '"confusion_matrix": skm.confusion_matrix(labels, predicted, labels=list(range(k)))'
        ".tolist(),",
        '"confusion_matrix": skm.confusion_matrix(predicted, labels, labels=list(range(k)))'
        ".tolist(),",
        "tests/test_eval_report.py",
        "test_confusion_rows_are_the_true_class",
    ),
    m(
        "kubeflow: --data under the mount path without a claim is accepted",
        "pipelines/targets/kubeflow/cluster_checks.py",
        'if path.startswith("gs://") or (pvc_name and (path + "/").startswith(root)):',
        'if path.startswith("gs://") or (path + "/").startswith(root):',
        "tests/test_kubeflow_cluster.py::test_a_data_path_under_the_mount_path_with_no_claim"
        "_mounted_is_refused",
        "test_a_data_path_under_the_mount_path_with_no_claim_mounted_is_refused",
    ),
    m(
        "katib always maximizes",
        "pipelines/targets/kubeflow/experiment.py",
        '"type": objective.goal,',
        '"type": "maximize",',
        "tests/test_kubeflow_katib.py::test_the_experiment_optimizes_toward_the_primary_metrics_goal",
        "test_the_experiment_optimizes_toward_the_primary_metrics_goal[val_loss",
    ),
    m(
        "a NaN val_loss beside a finite train_loss is reported",
        "trainer/train.py",
        'for name in ("train_loss", "val_loss"):',
        'for name in ("train_loss",):',
        B + "trainer.py::test_a_nan_validation_loss_beside_a_finite_training_loss_reports"
        "_the_worst",
        "test_a_nan_validation_loss_beside_a_finite_training_loss_reports_the_worst",
        timeout=400.0,
    ),
    m(
        "a stale PWD costs the fork server",
        "pipelines/jobs/fork_server.py",
        "return name in REPLICA_VARIABLES or name in SHELL_VARIABLES or name.startswith(prefixes)",
        "return name in REPLICA_VARIABLES or name.startswith(prefixes)",
        "tests/test_fork_server.py",
        "test_a_stale_pwd_does_not_cost_the_fork",
    ),
    # --- settings refusals at their edge ---    # --- settings refusals at their edge ---
    m(
        "no failure allowed is refused",
        "pipelines/settings_sections.py",
        'need(self, self.max_failed_trials >= 0, "max_failed_trials", "an integer >= 0")',
        'need(self, self.max_failed_trials > 0, "max_failed_trials", "an integer >= 0")',
        B + "settings.py",
        "test_the_last_valid_value_of_each_check_is_accepted",
    ),
    m(
        "all trials in parallel is refused",
        "pipelines/settings_sections.py",
        "1 <= self.parallel_trials <= self.max_trials,",
        "1 <= self.parallel_trials < self.max_trials,",
        B + "settings.py",
        "test_the_last_valid_value_of_each_check_is_accepted",
    ),
    m(
        "a kubeflow timeout below a minute is accepted",
        "pipelines/settings_cloud.py",
        'self, self.kubeflow_timeout_s >= 60, "kubeflow_timeout_s", "an integer >= 60 (seconds)"',
        'self, self.kubeflow_timeout_s >= 0, "kubeflow_timeout_s", "an integer >= 60 (seconds)"',
        B + "settings.py",
        "test_each_bad_setting_is_refused",
    ),
    # --- cost metrics and the model as a search parameter (issue 40) ---
    m(
        "the cost is reported at step 0, not with the last epoch",
        "trainer/task.py",
        'reporter.report(int(result.history[-1]["epoch"]), costs)',
        "reporter.report(0, costs)",
        "tests/test_cost_metrics.py::test_a_trial_reports_its_cost_and_a_team_builders_metric_with_its_last_step",
        "test_a_trial_reports_its_cost",
    ),
    m(
        "every metric counts as measured once",
        "pipelines/study/trials.py",
        "return {k: values[0] for k, values in seen.items() if len(values) == 1}",
        "return {k: values[0] for k, values in seen.items()}",
        "tests/test_cost_metrics.py",
        "test_a_metric_reported_every_step_is_not_measured_once",
    ),
    m(
        "every model gets every model's own parameters",
        "pipelines/study/model_choice.py",
        "+ tuple(dataclasses.replace(c, parent_values=()) for c in choice.active_children(m)),",
        "+ tuple(dataclasses.replace(c, parent_values=()) for c in choice.conditional),",
        "tests/test_model_choice.py",
        "test_the_backbones_preset_loads_each_model_with_its_own_parameters",
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
        'frozen.trainable_part(model, spec, depth, "float32").set_weights(list(trained))',
        'frozen.trainable_part(model, spec, depth, "float32").get_weights()',
        "tests/test_feature_training.py",
        "test_a_cached_trial_trains_as_from_images_and_exports_the_whole_model",
    ),
    m(
        "a trial from images saves only its trained part",
        "trainer/trial_export.py",
        'return frozen_depth > 0 and bool(environ.get("CLOUD_ML_TRIAL_ID"))',
        'return bool(environ.get("CLOUD_ML_TRIAL_ID"))',
        "tests/test_trainer.py",
        "test_mirrored_over_two_logical_cpus_reports_every_epoch",
    ),
    m(
        "a trial's whole model is rebuilt on other backbone weights",
        "trainer/trial_export.py",
        "if recorded and found != recorded:",
        "if recorded and found != recorded and not recorded:",
        "tests/test_trial_export.py",
        "test_the_rebuild_refuses_other_weights_and_a_folder_that_is_not_a_cached_trial",
    ),
    # --- a team's first week on Kubeflow and Vertex (issue 51) ---
    m(
        "Vertex's default algorithm runs as hyperopt's tpe on Katib",
        "pipelines/targets/kubeflow/experiment.py",
        '"ALGORITHM_UNSPECIFIED": "multivariate-tpe",',
        '"ALGORITHM_UNSPECIFIED": "tpe",',
        "tests/test_katib_suggestions.py",
        "test_the_default_algorithm_runs_as_optunas_multivariate_tpe_with_parallel_trials",
    ),
    m(
        "multi-node trials named by Katib's 40 characters alone",
        "pipelines/targets/kubeflow/experiment.py",
        "if trial_kind(nodes) != TRAINJOB:",
        "if True:",
        "tests/test_jobset_names.py",
        "test_every_trial_pod_name_fits_for_any_node_count",
    ),
    m(
        "several objectives keep Vertex's best measurement",
        "pipelines/study/objectives.py",
        'return "LAST_MEASUREMENT" if objectives > 1 else "BEST_MEASUREMENT"',
        'return "BEST_MEASUREMENT"',
        "tests/test_behaviour_measurement.py",
        "test_vertex_keeps_the_last_measurement_of_a_study_with_several_objectives",
    ),
    m(
        "manifests write the default namespace",
        "pipelines/targets/kubeflow/cli/commands.py",
        "check_settings(settings)  # the namespace and job kind, as compile and submit check",
        "pass",
        "tests/test_behaviour_kubeflow_cli.py",
        "test_the_default_namespace_is_refused_alike_by_compile_and_manifests",
    ),
    # --- issue 51: diverged trials never picked, continuation at equal budget ---
    m(
        "a diverged trial is a candidate of selection",
        "pipelines/study/selection.py",
        "if trials_lib.is_diverged(trial):",
        "if False:",
        "tests/test_diverged_trials.py",
        "test_a_diverged_trial_is_never_picked_though_an_earlier_epoch_scored_best",
    ),
    m(
        "the trials artifact keeps a diverged trial SUCCEEDED",
        "pipelines/study/trials_artifact.py",
        "trials = [trials_lib.mark_diverged(t) for t in trials]",
        "trials = list(trials)",
        "tests/test_diverged_trials.py",
        "test_the_trials_artifact_writes_a_diverged_trial_infeasible_with_its_reason",
    ),
    m(
        "an exploded but finite validation loss is a result",
        "trainer/train.py",
        'check_exploded(history, len(metadata["class_names"]))',
        "pass",
        B + "trainer.py::test_an_exploded_but_finite_validation_loss_is_a_diverged_trial",
        "test_an_exploded_but_finite_validation_loss_is_a_diverged_trial",
    ),
    m(
        "earlier trials keep a longer budget's score",
        "pipelines/study/continuation.py",
        "scored = trial if epochs is None else at_budget(trial, epochs, today[0], selection)",
        "scored = trial",
        "tests/test_continuation_budget.py",
        "test_a_six_epoch_trial_is_scored_at_todays_three_epochs_and_not_picked_for_its_six",
    ),
    # --- a team's first week (issue 51: lineage, reports, the features step) ---
    m(
        "the features step plans for the fixed --model only, not each model of a choice",
        "pipelines/study/feature_plan.py",
        "choice = next((p for p in parameters if p.parameter_id == MODEL_PARAMETER), None)",
        "choice = None",
        "tests/test_features_pipeline.py",
        "test_a_model_choice_caches_each_backbone_the_study_can_pick",
    ),
    m(
        "the features job takes every GPU of the trial machine",
        "pipelines/jobs/machines.py",
        "if count <= 1 or not is_gpu(accelerator_type):",
        "if True:",
        "tests/test_features_pipeline.py",
        "test_the_features_job_runs_the_entrypoint_on_the_trial_machine",
    ),
    m(
        "a continued study's trials are plotted by id, this run's first",
        "pipelines/reports/trial_plots.py",
        "return (origins.index(run) if run else len(origins), id_key(number))",
        'return (0, id_key(str(trial["id"])))',
        "tests/test_trial_report.py",
        "test_a_continued_studys_trials_are_plotted_as_they_ran_with_labels_apart",
    ),
    m(
        "trials RUN ignores a study that moved on since the newest run's artifact",
        "pipelines/reports/running_study.py",
        "return not uri.is_file() or trials_file.stat().st_mtime_ns > uri.stat().st_mtime_ns",
        "return not uri.is_file()",
        "tests/test_trial_report.py",
        "test_trials_of_a_running_study_show_its_running_trials_at_their_latest_epoch",
    ),
    m(
        "every replica of the final job echoes its epochs",
        "pipelines/jobs/local_job.py",
        "echo = self.echo if (replica.pool_index, replica.replica_index) == (0, 0) else None",
        "echo = self.echo",
        "tests/test_local_job.py",
        "test_every_replica_gets_vertex_env_and_its_own_log",
    ),
    # --- issue 51: a team's first week (the local run's faults) ---
    m(
        "an interrupted final job starts again from epoch 1",
        "pipelines/jobs/kept_job.py",
        "_remove_worker_copies(base)",
        'shutil.rmtree(replica_env.output_dirs(base)["AIP_CHECKPOINT_DIR"])',
        "tests/test_kept_job.py::test_an_interrupted_final_job_resumes_chief_and_worker_after_the_same_epoch",
        "test_an_interrupted_final_job_resumes_chief_and_worker_after_the_same_epoch",
        timeout=600.0,
    ),
    m(
        "a finished final job runs again",
        "pipelines/jobs/kept_job.py",
        "if finished(base):",
        "if False:",
        "tests/test_kept_job.py",
        "test_a_finished_job_is_reused_without_starting_a_process",
    ),
    m(
        "the same model is registered as a new version",
        "pipelines/targets/local/registry.py",
        "if found := registered_as(registry, name, digest):",
        "if found := None:",
        "tests/test_registry_and_vertex_trials.py",
        "test_the_same_model_registered_again_is_the_version_already_there",
    ),
    m(
        "an output that cannot be written is found when the run takes its lock",
        "pipelines/targets/local/cli/commands.py",
        'local_preflight.check_writable("output", settings.local.output)',
        "pass",
        "tests/test_local_cli.py",
        "test_run_refuses_an_output_or_registry_it_cannot_write_before_any_work",
    ),
    m(
        "an objective the model cannot report is accepted",
        "pipelines/settings_space.py",
        "if known.spec.own_metrics or not known.checked:",
        "if True:",
        "tests/test_local_cli.py",
        "test_an_objective_the_model_cannot_report_is_refused_up_front",
    ),
    # --- MLflow tracking (issue 55) ---
    m(
        "trial runs are not nested under the study run",
        "pipelines/tracking/runs.py",
        "tags = {**run.tags, **({PARENT_TAG: parent} if parent else {})}",
        "tags = dict(run.tags)",
        "tests/test_tracking.py::test_a_study_on_a_server_is_one_run_with_a_nested_run_per_trial",
        "test_a_study_on_a_server_is_one_run_with_a_nested_run_per_trial",
        timeout=600.0,  # it starts an MLflow server
    ),
    m(
        "a trial's metric history is one step off",
        "pipelines/tracking/runs.py",
        '(key, value, base + _elapsed_ms(m), int(m.get("stepCount", 0)))',
        '(key, value, base + _elapsed_ms(m), int(m.get("stepCount", 0)) - 1)',
        "tests/test_tracking.py::test_a_study_on_a_server_is_one_run_with_a_nested_run_per_trial",
        "test_a_study_on_a_server_is_one_run_with_a_nested_run_per_trial",
        timeout=600.0,  # it starts an MLflow server
    ),
    m(
        "a user's own tracking_uri nests under KFP's task run",
        "pipelines/tracking/store.py",
        'parent = env.get(RUN_ENV, "") if uri == kfp_uri else ""',
        'parent = env.get(RUN_ENV, "")',
        "tests/test_tracking.py::test_under_kfps_task_run_the_study_nests_there",
        "test_under_kfps_task_run_the_study_nests_there",
        timeout=600.0,  # it starts an MLflow server
    ),
    m(
        "a tracked step writes its runs in its own process (MLflow's import on the step)",
        "pipelines/tracking/steps.py",
        "self.writer = Writer(self.store.uri) if self.store is not None else None",
        "self.writer = None",
        "tests/test_tracking.py::test_a_tracked_step_writes_its_runs_without_importing_mlflow_itself",
        "test_a_tracked_step_writes_its_runs_without_importing_mlflow_itself",
        timeout=600.0,
    ),
    m(
        "a writer starved at nice 19 is waited on, not replaced",
        "pipelines/tracking/writer.py",
        "if not self._ready(0.0):  # still warming up at nice 19: a normal-priority one instead",
        "if False:",
        "tests/test_tracking.py::test_a_writer_starved_at_low_priority_is_replaced_and_the_study_is_written",
        "test_a_writer_starved_at_low_priority_is_replaced_and_the_study_is_written",
        timeout=600.0,  # the starved writer is given up after the test's 120 s
    ),
    m(
        "the Vertex HPT job's trials get no TensorBoard",
        "pipelines/targets/vertex/hpt_job.py",
        '"tensorboard": tensorboard,  # Vertex sets AIP_TENSORBOARD_LOG_DIR in each trial',
        '"tensorboard": "",',
        "tests/test_pipeline_spec.py",
        "test_a_vertex_tensorboard_reaches_every_trial_and_the_final_job",
    ),
    m(
        "Vertex AI ExperimentRuns get no per-epoch time series",
        "pipelines/targets/vertex/experiments.py",
        'run.log_time_series_metrics(metrics, step=int(m.get("stepCount", 0)))',
        "pass",
        "tests/test_vertex_experiments.py",
        "test_compile_vertex_with_tracking_vertex_writes_an_experiment_run_per_trial",
    ),
    m(
        "a retried Vertex fetch step writes its finished ExperimentRuns again (time series twice)",
        "pipelines/targets/vertex/experiments.py",
        "if run.state == Execution.State.RUNNING:",
        "if True:",
        "tests/test_vertex_experiments.py",
        "test_a_retried_fetch_step_writes_every_trials_run_once",
    ),
    m(
        "the kubeflow register step leaves the final job's MLflow run without its version",
        "pipelines/targets/kubeflow/steps/register.py",
        'tracker.record(model=f"{model_name}/{run_id}", path=where)',
        "pass",
        "tests/test_tracking.py",
        "test_the_kubeflow_register_step_tags_the_final_run_with_its_version",
        timeout=600.0,  # it starts an MLflow server
    ),
    m(
        "a Vertex AI TensorBoard is dropped silently by the local target",
        "pipelines/targets/local/wiring.py",
        'refuse_vertex_only(settings, "local")',
        "pass",
        "tests/test_vertex_experiments.py",
        "test_a_tensorboard_is_refused_where_the_target_reads_none",
    ),
    m(
        "the trainer writes no HParams session to TensorBoard",
        "trainer/train.py",
        "summaries.open_writer(run.tensorboard_dir, hparams)",
        "tf.summary.create_file_writer(run.tensorboard_dir)",
        "tests/test_trainer.py::test_mirrored_over_two_logical_cpus_reports_every_epoch",
        "test_mirrored_over_two_logical_cpus_reports_every_epoch",
        timeout=600.0,
    ),
    # --- what a user would feel first: bugs that once passed the whole suite (issue 56) ---
    m(
        "trials --metric val_loss on an accuracy study ranks the highest loss first",
        "pipelines/reports/trial_report.py",
        'metric_id, goal or known.get(metric_id) or METRIC_GOALS.get(metric_id, "maximize")',
        'metric_id, goal or known.get(metric_id) or "maximize"',
        "tests/test_trial_report.py",
        "test_trials_by_val_loss_on_an_accuracy_study_shows_the_lowest_loss_first",
    ),
    m(
        "a strict constraint accepts a trial exactly at its bound",
        "pipelines/study/objectives.py",
        '"<": operator.lt,',
        '"<": operator.le,',
        "tests/test_behaviour_objectives.py",
        "test_a_strict_constraint_refuses_a_trial_exactly_at_its_bound_as_compiled",
    ),
    m(
        "a trial missing a secondary objective succeeds",
        "pipelines/study/trial_runner.py",
        "return any(m not in final.metrics for m in (metric_ids[:1] if at_rung else metric_ids))",
        "return any(m not in final.metrics for m in metric_ids[:1])",
        "tests/test_behaviour_objectives.py",
        "test_a_trial_reporting_the_primary_but_not_a_secondary_objective_fails_naming_it",
    ),
    m(
        "a Katib trial missing a secondary objective is succeeded",
        "pipelines/targets/kubeflow/katib_trials.py",
        "missing = [x.metric_id for x in space.metrics if x.metric_id not in reported]",
        "missing = [x.metric_id for x in space.metrics[:1] if x.metric_id not in reported]",
        "tests/test_kubeflow_katib.py",
        "test_a_katib_trial_without_a_secondary_objective_is_failed_not_ranked",
    ),
    m(
        "a SIGHUP (a closed terminal) kills the study without marking its trials",
        "pipelines/study/interruption.py",
        "STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)",
        "STOP_SIGNALS = (signal.SIGTERM,)",
        "tests/test_interruption.py::test_a_stop_signal_to_the_study_keeps_its_trials_to_rerun",
        "test_a_stop_signal_to_the_study_keeps_its_trials_to_rerun",
    ),
    m(
        "a signal to the study leaves its stopped trials running",
        "pipelines/targets/local/local_study.py",
        "self._record_stopped(running)",
        "pass",
        "tests/test_interruption.py::test_a_stop_signal_to_the_study_keeps_its_trials_to_rerun",
        "test_a_stop_signal_to_the_study_keeps_its_trials_to_rerun",
    ),
    m(
        "an init container that cannot pull its image is not watched",
        "pipelines/targets/kubeflow/pod_watch.py",
        "containers = list(status.init_container_statuses or [])"
        " + list(status.container_statuses or [])",
        "containers = list(status.container_statuses or [])",
        "tests/test_kubeflow_pod_watch.py",
        "test_an_init_container_that_cannot_pull_its_image_stops_the_tune_step_naming_it",
    ),
    m(
        "--continue-from a folder of several runs continues the oldest",
        "pipelines/targets/earlier_runs.py",
        "for run in reversed(runs):  # newest first",
        "for run in runs:",
        "tests/test_continuation_sources.py",
        "test_continuing_an_output_folder_of_several_runs_takes_the_newest_runs_trials",
    ),
    m(
        "the memory preflight uses the host's RAM in a memory-limited container",
        "pipelines/targets/local/cli/preflight.py",
        "total = min(total, int(limit))",
        "total = total",
        "tests/test_run_ownership.py",
        "test_in_a_memory_limited_container_the_limit_not_the_hosts_memory_bounds_the_image_size",
    ),
    m(
        "a tuned momentum does nothing: SGD built without it",
        "trainer/train.py",
        "return keras.optimizers.SGD(hparams.learning_rate, momentum=hparams.momentum)",
        "return keras.optimizers.SGD(hparams.learning_rate)",
        "tests/test_every_tunable.py::test_each_trainer_hyperparameter_changes_what_trains_and_what_is_exported[images-momentum]",
        "test_each_trainer_hyperparameter_changes_what_trains_and_what_is_exported",
        timeout=600.0,
    ),
    m(
        "a cached trial's head built at the default width",
        "trainer/stages.py",
        'num_units=int(hparams.model_params.get("num_units", units)),',
        "num_units=int(units),",
        "tests/test_every_tunable.py::test_each_models_own_hyperparameter_changes_what_is_built_on_every_path"
        "[mobilenet_v3_small-cache-num_units]",
        "test_each_models_own_hyperparameter_changes_what_is_built_on_every_path",
        timeout=600.0,
    ),
    m(
        "the exported whole model built at the default width",
        "trainer/stages.py",
        'model = build_model(spec, hparams.model_params, "none", image_shape, num_classes)',
        'model = build_model(spec, {}, "none", image_shape, num_classes)',
        "tests/test_every_tunable.py::test_each_models_own_hyperparameter_changes_what_is_built_on_every_path[cnn-images-num_units]",
        "test_each_models_own_hyperparameter_changes_what_is_built_on_every_path",
        timeout=600.0,
    ),
    m(
        "the export fed unscaled pixels",
        "trainer/export.py",
        "logits = model(tf.cast(images, tf.float32) / 255.0, training=False)",
        "logits = model(tf.cast(images, tf.float32), training=False)",
        "tests/test_cluster_and_export.py::"
        "test_the_export_serves_encoded_images_as_the_trained_model_scores_them[cnn]",
        "test_the_export_serves_encoded_images_as_the_trained_model_scores_them",
        timeout=600.0,
    ),
    # --- spot and flex-start capacity (issue 53) ---
    m(
        "the HPT job's trials sent without their scheduling",
        "pipelines/targets/vertex/hpt_job.py",
        '"scheduling": vertex_scheduling(trial_scheduling, max_wait_hours),',
        '"scheduling": {},',
        "tests/test_scheduling.py::"
        "test_vertex_trials_run_on_spot_and_the_study_keeps_its_stopping_config",
        "test_vertex_trials_run_on_spot_and_the_study_keeps_its_stopping_config",
    ),
    m(
        "the final custom job left on GCPC's default strategy",
        "pipelines/targets/vertex/wiring.py",
        'strategy=scheduling.outputs["strategy"],  # STANDARD, SPOT or FLEX_START',
        "",
        "tests/test_scheduling.py",
        "test_the_final_custom_job_gets_its_capacity_through_gcpcs_launcher",
    ),
    m(
        "run's preflight lets spot trials through to the pipeline",
        "pipelines/targets/local/cli/commands.py",
        "check_settings(settings)  # what the target cannot honour, as compile refuses it",
        "pass",
        "tests/test_scheduling.py::test_run_refuses_spot_trials_before_any_work",
        "test_run_refuses_spot_trials_before_any_work",
    ),
    m(
        "the data step's fan-out loop unbounded (parallelism dropped)",
        "pipelines/pipeline.py",
        'planned.outputs["Output"], parallelism=s.data.prepare_workers, name="shard-groups"',
        'planned.outputs["Output"], parallelism=0, name="shard-groups"',
        "tests/test_prepare_fanout.py",
        "test_prepare_workers_fans_the_data_step_out_in_the_compiled_spec",
    ),
    m(
        "a rerun of prepare rewrites the shards an interrupted run finished",
        "dataprep/prepare.py",
        "kept, note = resume.kept_shards(stage, document)",
        'kept, note = {}, ""',
        "tests/test_prepare_resume.py",
        "test_a_rerun_after_a_kill_writes_only_the_missing_shards",
        timeout=600.0,
    ),
    m(
        "a truncated shard kept on a rerun",
        "dataprep/shards.py",
        'if not intact(directory, found["shard"]):',
        "if False:",
        "tests/test_prepare_resume.py",
        "test_a_truncated_shard_is_written_again_and_only_it",
        timeout=600.0,
    ),
    m(
        "a kept shard checked by size alone (other bytes of the same size kept)",
        "dataprep/shards.py",
        'return bool(records.file_digest(path)["sha256"] == shard["sha256"])',
        "return True",
        "tests/test_prepare_resume.py",
        "test_a_kept_shard_with_other_bytes_of_the_same_size_is_written_again",
        timeout=600.0,
    ),
    m(
        "each run's data step prepares into its own artifact folder (nothing to resume)",
        "pipelines/targets/local/cli/run.py",
        'dataset_dir=str(dataset_dir or ""),  # keyed: a rerun reuses or resumes it',
        'dataset_dir="",',
        "tests/test_run_dataset_resume.py",
        "test_a_rerun_after_ctrl_c_in_the_data_step_keeps_the_shards_it_had_written",
        timeout=900.0,
    ),
    m(
        "the evaluate step's MLflow writer niced (never ready beside the scoring: imported twice)",
        "pipelines/tracking/steps.py",
        'self.writer = Writer(uri, nice=False) if tracked.get("mlflow_run_id") else None',
        'self.writer = Writer(uri, nice=True) if tracked.get("mlflow_run_id") else None',
        "tests/test_tracking.py",
        "test_the_evaluate_steps_writer_warms_up_at_the_steps_own_priority",
    ),
    # --- continue-from at other workers per trial (issue 54, item 5) ---
    m(
        "an earlier study of other workers per trial continues as if equal",
        "pipelines/study/continuation.py",
        'if "trial_workers" in differ:',
        "if False:",
        "tests/test_continuation_budget.py",
        "test_another_budget_is_refused_in_one_line",
    ),
    m(
        "a study recorded before trial_workers is read as unknown workers (not compared)",
        "pipelines/targets/earlier_runs.py",
        'recorded = {"trial_workers": 0, **json.loads(identity.read_text())}'
        "  # one-machine trials before",
        "recorded = json.loads(identity.read_text())",
        "tests/test_continuation_budget.py",
        "test_run_refuses_another_budget_in_one_line_before_anything",
    ),
    # --- a new MLflow store appears only whole (a killed writer left half-made tables) ---
    m(
        "a new SQLite store created in place, half-made when its writer is killed",
        "pipelines/tracking/runs.py",
        "_create_whole(uri, MlflowClient)",
        "pass",
        "tests/test_tracking.py",
        "test_a_store_whose_creator_died_mid_creation_is_made_whole_by_the_next_writer",
    ),
    # --- issue 53 on Kubeflow: hyperband's stall modelled, spot node pools ---
    m(
        "Katib's hyperband modelled as promoting every trial it is asked for (no stall)",
        "pipelines/targets/kubeflow/katib_suggestions.py",
        "top = math.ceil(math.ceil(request * eta ** (-i)) / eta)",
        "top = request",
        "tests/test_katib_suggestions.py",
        "test_the_hyperband_model_creates_the_trials_katibs_service_created",
    ),
    m(
        "a spot trial whose pod is preempted fails the trial",
        "pipelines/targets/kubeflow/trial_template.py",
        "pod_failure_policy=spot.PREEMPTED_POD_IGNORED if placed else None,",
        "pod_failure_policy=None,",
        "tests/test_kubeflow_spot.py",
        "test_a_spot_trial_runs_on_the_pool_and_a_preempted_pod_is_replaced",
    ),
    m(
        "spot pods select the pool but do not tolerate its taint",
        "pipelines/targets/kubeflow/spot.py",
        'return {"nodeSelector": {key: value}, "tolerations": [toleration]}',
        'return {"nodeSelector": {key: value}}',
        "tests/test_kubeflow_spot.py",
        "test_a_spot_trial_runs_on_the_pool_and_a_preempted_pod_is_replaced",
    ),
    m(
        "a spot pod waiting for its pool is stopped at once as Unschedulable",
        "pipelines/targets/kubeflow/pod_watch.py",
        "on_a_pool = bool(pod.spec and pod.spec.node_selector)  # spot: waits for the pool's nodes",
        "on_a_pool = False",
        "tests/test_kubeflow_spot.py",
        "test_a_spot_pod_waiting_for_the_pool_is_given_the_pending_grace",
    ),
    # --- a run's settings resolved once into its plan (issue 57 item 3) ---
    m(
        "the study's identity derives the model and the search space from the settings again",
        "pipelines/app/study_identity.py",
        "space = plan.space",
        "space = resolve(settings).space",
        "tests/test_settings_walk.py::test_hpt_pipeline_run_derives_the_model_and_the_space_once",
        "test_hpt_pipeline_run_derives_the_model_and_the_space_once",
    ),
    # --- a target is one package (issue 57 item 1): the shared DAG asks, never branches ---
    m(
        "the shared DAG reads Kubeflow's settings again instead of asking the binding",
        "pipelines/pipeline.py",
        '"shared_root": binding.shared_root(s),  # e.g. the Kubeflow data PVC mount path',
        '"shared_root": s.kubeflow.data_mount_path if target == "kubeflow" else "",',
        "tests/test_targets.py",
        "test_no_code_outside_a_targets_package_and_the_registry_branches_on_its_name",
    ),
    m(
        "Kubeflow's binding gives no shared root: replicas miss the data PVC's paths",
        "pipelines/targets/kubeflow/wiring.py",
        'shared_root=lambda s: s.kubeflow.data_mount_path if s.kubeflow.data_pvc else "",',
        'shared_root=lambda s: "",',
        "tests/test_pipeline_spec.py",
        "test_kubeflow_mounts_the_data_pvc_on_every_step_that_touches_the_data",
    ),
    m(
        "a setting only Kubeflow takes is compiled into another target's spec",
        "pipelines/wiring/__init__.py",
        'exclusive={"data_pvc": "a PersistentVolumeClaim is for the kubeflow target"},',
        "exclusive={},",
        "tests/test_pipeline_spec.py",
        "test_a_data_pvc_is_refused_for_targets_that_cannot_mount_it",
    ),
]


def project_files() -> list[str]:
    """Paths to copy: tracked files and untracked ones git does not ignore.

    Outside a git checkout (an exported copy of the tree: no `.git`), every file that the
    project's `.gitignore` does not name (`walked_files`).
    """
    if not (ROOT / ".git").exists():
        return walked_files(ROOT)
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def _ignore_rules(root: Path) -> list[tuple[bool, bool, bool, str]]:
    """`.gitignore`'s lines as (negated, directories only, anchored, pattern)."""
    path = root / ".gitignore"
    rules = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        line = line.removeprefix("!")
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line  # a slash before the end: relative to the root
        rules.append((negated, dir_only, anchored, line.lstrip("/")))
    return rules


def walked_files(root: Path) -> list[str]:
    """The files under `root` that its `.gitignore` (the subset of git's rules it uses) keeps."""
    rules = _ignore_rules(root)

    def ignored(rel: str, is_dir: bool) -> bool:
        verdict = False
        for negated, dir_only, anchored, pattern in rules:
            name = rel if anchored else rel.rsplit("/", 1)[-1]
            if (is_dir or not dir_only) and fnmatch.fnmatchcase(name, pattern):
                verdict = not negated
        return verdict

    found = []
    for folder, dirs, files in os.walk(root):
        base = Path(folder).relative_to(root).as_posix()
        prefix = "" if base == "." else f"{base}/"
        dirs[:] = sorted(d for d in dirs if d != ".git" and not ignored(prefix + d, True))
        found += [
            prefix + f for f in sorted(files) if f != ".git" and not ignored(prefix + f, False)
        ]
    return found


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
    env["PWD"] = str(copy)  # as a shell started there would set it (the tests run from there)
    env.pop("OLDPWD", None)
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


def preflight(chosen: list[Mutant], files: list[str]) -> bool:
    """Whether each test file the mutants name passes alone in an unmutated copy.

    A file that fails there (or passes only after another file ran) would report false kills.
    """
    if str(ROOT) not in sys.path:  # run as a script: tests/ is on the path, not the root
        sys.path.insert(0, str(ROOT))
    from tests.run_each_file import run_alone

    tests = list(dict.fromkeys(t.split("::")[0] for x in chosen for t in x.tests))
    with tempfile.TemporaryDirectory(prefix="mutant-preflight-") as folder:
        copy = Path(folder) / "project"
        copy_project(copy, files)
        check_copy_runs(copy)
        failing = [t for t in tests if run_alone(copy, t)[0] not in (0, 5)]
    for test in failing:
        print(f"preflight: {test} fails alone, unmutated: fix it before trusting its kills")
    return not failing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "-k", action="append", default=[], help="only mutants whose name contains this (repeatable)"
    )
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument(
        "--preflight",
        action="store_true",
        help="first run each chosen test file alone in an unmutated copy (all must pass)",
    )
    args = parser.parse_args(argv)
    chosen = [x for x in MUTANTS if not args.k or any(k in x.name for k in args.k)]
    if args.list:
        for x in chosen:
            print(f"{x.name}  [{x.path}]  {x.edits[0][0]!r} -> {x.edits[0][1]!r}  ({x.expect})")
        return 0
    files = project_files()
    if args.preflight and not preflight(chosen, files):
        return 2
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
