"""mutmut over chosen modules, with only the test files that cover them, in a copy.

`make mutmut MODULES="pipelines/study/selection.py pipelines/jobs/machines.py"` (or
`.venv/bin/python tests/mutmut_run.py MODULE ... [--jobs N] [--keep] [--survivors]`;
`--list` shows the modules and their test files). The project's files (tracked, and
untracked ones git does not ignore) are copied to `runs/mutmut/<modules' digest>/`; the
copy's `pyproject.toml` gets a `[tool.mutmut]` section (the packages as `source_paths`, the
modules as `only_mutate`, their test files from `COVERING` as
`pytest_add_cli_args_test_selection`); `mutmut run` runs there, with `PWD` and `PYTHONPATH`
set to its `mutants/` folder so that the processes the tests start (trainer runs, studies)
import the mutated code too. It prints each module's score and every surviving mutant's name
(`cd runs/mutmut/... && mutmut show NAME`).

mutmut (3.x) finds which tests reach a mutated function by recording calls in the pytest
process; a function reached only from a process a test starts has "no tests" and is reported
as not covered, not as killed. After adding tests, `--survivors` reruns only the mutants
the last run of the same modules left. Not collected by pytest (no `test_` prefix).
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


def _named(path: str, *names: str) -> tuple[str, ...]:
    """`path::test_<name>` for each of `names`: single tests picked out of a file."""
    return tuple(f"{path}::test_{name}" for name in names)


# Each module (or folder, ending in /) → the test files that cover it, cheapest first.
COVERING: dict[str, tuple[str, ...]] = {
    "pipelines/study/selection.py": ("tests/test_selection.py",),
    "pipelines/study/search_space.py": (
        "tests/test_search_space.py",
        "tests/test_mut_search_space.py",
        "tests/test_contract.py::test_a_space_the_trainer_would_refuse_is_refused_when_loaded",
        "tests/test_model_choice.py::test_a_model_choice_the_trainer_cannot_take_is_refused_in_one_line",
    ),
    "pipelines/study/sampler.py": _named(
        "tests/test_local_study.py",
        "scales_and_types_are_honoured_by_the_sampler",
        "reverse_log_maps_back_and_forth",
        "tpe_beats_random_search_on_average_within_the_same_budget",
        "a_short_study_tries_every_categorical_value_first",
        "after_the_start_up_tpe_takes_over_from_the_balanced_draws",
        "a_resumed_study_goes_on_covering_the_values_it_has_not_tried",
        "grid_covers_the_grid_once_and_ends_there",
        "grid_points_expand_conditional_children",
        "grid_with_a_double_is_refused_before_anything_runs",
        "the_same_seed_proposes_the_same_trials_and_another_seed_does_not",
    )
    + ("tests/test_mut_sampler.py",),
    "pipelines/study/failure_rules.py": ("tests/test_failure_rules.py",),
    "pipelines/study/objectives.py": (
        "tests/test_objective_rules.py",
        "tests/test_pareto.py",
        "tests/test_behaviour_objectives.py",
    ),
    "pipelines/study/continuation.py": (
        "tests/test_continuation.py",
        "tests/test_mut_continuation.py",
    ),
    "pipelines/study/feature_plan.py": _named(
        "tests/test_features_pipeline.py",
        "discrete_values_cache_every_frozen_prefix_but_not_the_whole_network",
        "an_integer_range_is_capped_at_the_deepest_frozen_prefixes",
        "a_conditional_trainable_blocks_is_found_under_its_parent",
        "nothing_is_cached_and_the_plan_says_why",
        "nothing_to_cache_gives_empty_pools_and_no_folder",
        "trials_and_the_final_job_get_features_only_when_a_cache_was_computed",
    )
    + ("tests/test_mut_feature_plan.py",),
    "pipelines/study/interruption.py": (
        "tests/test_interruption.py",
        "tests/test_mut_interruption.py",
    ),
    "pipelines/app/study_identity.py": ("tests/test_run_ownership.py",),
    "pipelines/settings.py": (
        "tests/test_settings.py",
        "tests/test_settings_sections.py",
        "tests/test_behaviour_settings.py",
        "tests/test_mut_settings_load.py",
    ),
    "pipelines/settings_sections.py": (
        "tests/test_settings.py",
        "tests/test_settings_sections.py",
        "tests/test_behaviour_settings.py",
    ),
    "pipelines/settings_cloud.py": (
        "tests/test_settings.py",
        "tests/test_settings_sections.py",
        "tests/test_behaviour_settings.py",
        "tests/test_mut_settings_cloud.py",
    ),
    "pipelines/study/study_plan.py": ("tests/test_local_study.py", "tests/test_study_faults.py"),
    "trainer/part_cost.py": ("tests/test_part_cost.py",),
    "pipelines/settings_space.py": (
        "tests/test_mut_settings_space.py",
        "tests/test_model_choice.py::test_the_study_image_size_must_suit_every_model_in_the_choice",
        "tests/test_model_choice.py::test_weights_set_for_the_study_must_suit_every_model_unset_"
        "is_each_models_own",
        # one team model checked in its process (the others cost a TensorFlow start each)
        "tests/test_models.py::test_a_team_models_own_min_image_size_refuses_smaller_images",
    ),
    # The rule tests only: every test that checks an Experiment runs for each surviving mutant
    # of the module (~1,300), and the files' other tests start trainers and local executors.
    "pipelines/targets/kubeflow/katib_rules.py": _named(
        K + "katib.py",
        "built_experiments_pass_the_webhook_rules",
        "grid_experiments_respect_the_grid_services_rules",
        "each_broken_experiment_is_refused_with_the_webhook_message",
    )
    + (
        "tests/test_behaviour_kubeflow.py::test_small_studies_with_the_whole_budget_allowed_to_"
        "fail_pass_katibs_rules",
        "tests/test_mut_katib_rules.py",
    ),
    # Katib's tests but the slow one that trains (minutes for each mutant it does not kill)
    **{
        module: _named(
            K + "katib.py",
            "experiment_round_trips_through_katib_models_and_the_api_client",
            "trial_template_runs_the_trial_pool_with_vertex_style_flags",
            "the_experiment_optimizes_toward_the_primary_metrics_goal",
            "algorithms_counts_and_selection_are_mapped",
            "what_katib_cannot_run_is_refused_in_one_line",
            "built_experiments_pass_the_webhook_rules",
            "grid_experiments_respect_the_grid_services_rules",
            "each_broken_experiment_is_refused_with_the_webhook_message",
            "collector_reads_hypertune_lines_as_katib_does",
            "tune_component_end_to_end_with_the_api_replaced",
            "tune_fails_with_katibs_reason_when_the_failure_budget_is_spent",
            "tune_times_out_naming_the_experiment",
            "a_rerun_resumes_the_same_experiment",
            "katib_experiment_through_the_local_executors",
            "render_refuses_assignments_katib_would_refuse",
            "render_fills_trial_metadata_references_as_katib_does",
        )
        + extra
        for module, extra in (
            (
                "pipelines/targets/kubeflow/experiment.py",
                (
                    "tests/test_behaviour_kubeflow.py",
                    K + "cluster.py",
                    "tests/test_mut_experiment.py",
                    # the multi-node (TrainJob) trial template
                    K + "trial_trainjob.py::test_a_multi_node_trial_is_a_trainjob_each_release_"
                    "admits",
                    K + "trial_trainjob.py::test_the_trial_pods_carry_the_experiment_label_claim_"
                    "and_account",
                ),
            ),
            (
                "pipelines/targets/kubeflow/trial_template.py",
                (
                    K + "manifests.py",
                    K + "trainjob.py::test_every_pod_runs_as_uid_1000_"
                    "and_a_gpu_less_pod_sees_no_gpu",
                    "tests/test_mut_trial_template.py",
                ),
            ),
        )
    },
    "pipelines/targets/kubeflow/tfjob.py": (
        K + "tfjob.py",
        K + "cluster.py",
        K + "trainjob.py::test_every_pod_runs_as_uid_1000_and_a_gpu_less_pod_sees_no_gpu",
        "tests/test_mut_tfjob.py",
    ),
    "pipelines/targets/kubeflow/kube.py": (
        "tests/test_mut_tfjob.py",
        "tests/test_mut_experiment.py",
        K + "tfjob.py",
        K + "pod_watch.py",
        K + "trainjob.py",
    ),
    "pipelines/targets/kubeflow/pod_watch.py": (K + "pod_watch.py",),
    "pipelines/reports/trial_report.py": ("tests/test_trial_report.py",),
    "pipelines/targets/local/cli/preflight.py": (
        "tests/test_run_ownership.py",
        "tests/test_gcs_access.py",
        "tests/test_study_faults.py",
        "tests/test_mut_local_preflight.py",
    ),
    "pipelines/reports/durations.py": (
        "tests/test_trial_report.py::test_durations_come_from_the_timestamps",
        "tests/test_mut_durations.py",
    ),
    "pipelines/targets/earlier_runs.py": (
        "tests/test_continuation_sources.py",
        "tests/test_continuation_budget.py",
        "tests/test_mut_earlier_runs.py",
    ),
    # the rules and the spec, not the two studies test_budgets runs (a minute each per mutant)
    "pipelines/study/budgets.py": _named(
        "tests/test_budgets.py",
        "trials_without_progress_count_since_the_best_last_improved_by_end_time",
        "vertex_study_spec_carries_the_stopping_config_parsed_strictly",
    )
    + ("tests/test_mut_budgets.py",),
    "pipelines/targets/kubeflow/trainjob.py": (K + "trainjob.py", K + "trial_trainjob.py"),
    "pipelines/targets/kubeflow/job_kind.py": (K + "trial_trainjob.py",),
    "pipelines/targets/kubeflow/trial_trainjob.py": (K + "trial_trainjob.py",),
    "pipelines/targets/kubeflow/trainjob_checks.py": (K + "trial_trainjob.py", K + "trainjob.py"),
    # each file with the tests that reach it in the pytest process (no compiles, no runs)
    "pipelines/targets/vertex/hpt_job.py": (
        V + "hpt_job.py::test_doubles_as_vertex_renders_them_do_not_reach_the_request_as_floats",
        V + "hpt_job.py::test_the_request_carries_the_search_space_and_the_trial_pool",
        V + "hpt_job.py::test_early_stopping_survives_the_launchers_empty_field_stripping",
        V + "hpt_job.py::test_the_component_runs_gcpc_launcher_code_and_sends_the_stopping_spec",
        V + "hpt_job.py::test_the_runs_labels_reach_the_hpt_job_beside_the_system_labels",
        "tests/test_mut_vertex_hpt_job.py",
    ),
    "pipelines/targets/vertex/trials.py": (
        "tests/test_registry_and_vertex_trials.py",
        "tests/test_mut_vertex_trials.py",
    ),
    "pipelines/targets/vertex/models.py": (
        V + "run_checks.py::test_find_parent_model_writes_the_escaped_name",
        "tests/test_pipeline_spec.py::test_parent_model_lookup_asks_vertex_for_the_newest_model_by_name",
        "tests/test_mut_vertex_models.py",
    ),
    "pipelines/targets/vertex/client.py": (V + "client.py", "tests/test_mut_vertex_client.py"),
    "pipelines/targets/vertex/metadata.py": _named(
        "tests/test_lineage.py",
        "vertex_lineage_queries_the_run_context",
        "vertex_lineage_cli_with_a_job_id",
        "record_trials_creates_one_artifact_per_trial",
        "record_trials_retry_reuses_existing_artifacts",
        "record_trials_refuses_a_bad_job_name",
    )
    + ("tests/test_mut_vertex_metadata.py",),
    "pipelines/targets/vertex/serving.py": (
        V + "run_checks.py::test_schedules_are_warned_and_refused_by_the_serving_containers_date",
        "tests/test_mut_vertex_serving.py",
    ),
    "pipelines/targets/vertex/features_job.py": (
        "tests/test_features_pipeline.py::test_the_vertex_features_job_is_a_custom_job_the_api_accepts",
        "tests/test_mut_vertex_features_job.py",
    ),
    "pipelines/targets/vertex/": (
        V + "client.py",
        V + "hpt_job.py",
        V + "run_checks.py",
        V + "types.py",
        "tests/test_registry_and_vertex_trials.py",
    )
    + tuple(
        f"tests/test_mut_vertex_{name}.py"
        for name in ("hpt_job", "trials", "models", "client", "metadata", "serving", "features_job")
    ),
    "pipelines/jobs/machines.py": ("tests/test_worker_pools.py",)
    + _named(
        V + "run_checks.py",  # the machine tests, not the file's CLI runs
        "machine_accelerator_pairs_follow_vertexs_table",
        "each_refusal_names_what_vertex_takes_instead",
        "tpus_and_no_accelerator_are_not_gpus",
        "the_n1_rows_are_vertexs_gpu_table_by_vcpus",
        "a_name_that_is_no_n1_machine_type_is_refused_with_the_n1_pattern",
        "every_table_entry_is_a_machine_spec_the_api_parses",
        "compiling_for_vertex_refuses_a_pair_vertex_refuses",
    ),
    "pipelines/jobs/worker_pools.py": ("tests/test_worker_pools.py",),
    # the catalogue and a team's builders, without building a backbone; then the folder
    **dict.fromkeys(
        ("trainer/models/__init__.py", "trainer/models/custom.py"),
        ("tests/test_mut_models.py",)
        + _named(
            "tests/test_models.py",
            "a_weights_file_for_a_model_without_a_backbone_is_refused_not_ignored",
            "a_pretrained_model_without_weights_set_starts_from_imagenet",
            "pretrained_weights_for_a_model_without_a_backbone_are_refused",
            "an_unusable_team_model_is_refused_in_one_line_before_a_run",
            "a_team_models_own_min_image_size_refuses_smaller_images",
        ),
    ),
    # the builders: one small build per test, no download (test_models builds many)
    **dict.fromkeys(
        (
            "trainer/models/backbones.py",
            "trainer/models/cnn.py",
            "trainer/models/resnet50.py",
            "trainer/models/mobilenet.py",
        ),
        ("tests/test_mut_backbones.py",),
    ),
    "trainer/models/": ("tests/test_models.py", "tests/test_mut_models.py"),
    "trainer/evaluate.py": ("tests/test_eval_report.py", "tests/test_mut_evaluate.py"),
    # dataprep: test_prepare's tests that run in the pytest process (mutmut cannot see a second
    # process or kfp.local), the fast ones for each module, then test_mut_dataprep.
    "dataprep/splitting.py": _named(
        "tests/test_prepare.py",
        "plan_is_stratified_exact_disjoint_and_seeded",
        "split_folders_are_kept_and_only_missing_splits_are_carved",
        "round_trip_gives_the_folders_labels_counts_and_pixels",
    )
    + ("tests/test_behaviour_data.py",)
    + _named(
        "tests/test_mut_dataprep.py",
        "carved_splits_take_their_share_of_each_class_and_the_seed_decides_which",
        "tied_remainders_give_the_extra_image_to_the_lower_classes",
    ),
    "dataprep/sources.py": _named(
        "tests/test_prepare.py",
        "round_trip_gives_the_folders_labels_counts_and_pixels",
        "split_folders_are_kept_and_only_missing_splits_are_carved",
        "bad_input_gives_one_line_error_and_writes_nothing",
        "tfds_source_carves_a_validation_split_from_train",
        "sample_source_is_offline_digits_with_ten_classes",
        "the_sample_digits_are_load_digits_read_without_importing_scikit_learn",
        "the_in_memory_sample_prepares_as_its_image_folder_would",
        "webp_is_read_and_other_files_are_counted_and_named_on_screen",
    )
    + ("tests/test_behaviour_data.py", "tests/test_mut_dataprep.py"),
    "dataprep/": _named(
        "tests/test_prepare.py",
        "round_trip_gives_the_folders_labels_counts_and_pixels",
        "split_folders_are_kept_and_only_missing_splits_are_carved",
        "plan_is_stratified_exact_disjoint_and_seeded",
        "corrupt_files_are_skipped_and_listed_with_their_reason",
        "too_many_corrupt_files_fail_naming_them_and_leave_nothing",
        "an_interrupted_run_leaves_no_output_and_its_shards_for_a_rerun",
        "object_store_output_is_written_in_place_and_overwritten",
        "overwrite_replaces_a_local_dataset",
        "bad_input_gives_one_line_error_and_writes_nothing",
        "cli_prepares_and_prints_a_summary_table",
        "tfds_source_carves_a_validation_split_from_train",
        "sample_source_is_offline_digits_with_ten_classes",
        "the_in_memory_sample_prepares_as_its_image_folder_would",
        "webp_is_read_and_other_files_are_counted_and_named_on_screen",
    )
    + ("tests/test_behaviour_data.py", "tests/test_mut_dataprep.py"),
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


def mutmut_section(
    modules: Sequence[str], tests: Sequence[str], timeout_multiplier: float | None = None
) -> str:
    """The `[tool.mutmut]` TOML section for `modules` and `tests`.

    `timeout_multiplier`: mutmut's own (15 when None); a mutant's wall limit is (its tests'
    estimated seconds + 1) times it, which a loaded machine can outlast with no mutant at all.
    """
    only = [m + "*" if m.endswith("/") else m for m in modules]
    limit = f"timeout_multiplier = {timeout_multiplier}\n" if timeout_multiplier else ""
    return (
        "\n[tool.mutmut]\n"
        f"source_paths = {json.dumps(list(PACKAGES))}\n"
        f"only_mutate = {json.dumps(only)}\n"
        f"also_copy = {json.dumps(also_copied())}\n"
        f"pytest_add_cli_args = {json.dumps(['-p', 'no:randomly', '-p', 'no:cacheprovider'])}\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(list(tests))}\n"
        "use_git_change_detection = false\n"
        # Not forked from the process that ran the tests for the stats: TensorFlow, once it
        # has run an op there, hangs in a forked child (equivalent mutants timed out).
        'process_isolation = "forkserver"\n'
        f"{limit}"
    )


def also_copied() -> list[str]:
    """Top-level entries beside the packages (the tests read docs, images, benchmarks)."""
    tops = {p.split("/")[0] for p in project_files()}
    return sorted(tops - set(PACKAGES))


def outcomes(folder: Path) -> dict[str, str]:
    """Each mutant's outcome (`killed`, `survived`, `no tests`, ...), from `mutmut results`."""
    out = subprocess.run(
        [str(MUTMUT), "results", "--all", "true"],
        cwd=folder,
        capture_output=True,
        text=True,
        env=environment(folder),
    ).stdout
    found: dict[str, str] = {}
    for line in out.splitlines():
        name, _, outcome = line.strip().rpartition(": ")
        if name and "__mutmut_" in name:
            found[name] = outcome.strip()
    return found


def merged(earlier: dict[str, str], now: dict[str, str], rerun: Sequence[str]) -> dict[str, str]:
    """`earlier`'s outcomes, with `now`'s for the mutants `rerun` (mutmut forgets every verdict
    when the test selection changes, so `now` says "not checked" for the rest)."""
    return {**earlier, **{name: now.get(name, "not checked") for name in rerun}}


def scores(found: dict[str, str]) -> dict[str, collections.Counter[str]]:
    """Mutant outcomes per mutated file, and the name of each mutant not killed."""
    per: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for name, outcome in found.items():
        module = name.rsplit(".", 1)[0]  # mutmut names a mutant module.x_function__mutmut_N
        per[module][outcome] += 1
        per[module]["total"] += 1
        if outcome != "killed":
            per[module][f"names: {name} ({outcome})"] += 1
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
    parser.add_argument(
        "--timeout-multiplier",
        type=float,
        default=None,
        help="mutmut's per-mutant time limit factor (default mutmut's 15); raise it on a loaded "
        "machine, where a timeout is no kill",
    )
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="rerun only the mutants the last run of these modules did not kill (after adding "
        "tests); the ones it killed stay killed",
    )
    args = parser.parse_args(argv)
    if args.list:
        for module, tests in COVERING.items():
            print(f"{module:48} {' '.join(tests)}")
        return 0
    modules = args.modules or list(DEFAULT)
    for module in modules:
        if not (ROOT / module).exists():
            sys.exit(f"mutmut_run: {module}: no such module or folder (expected a path)")
    selected = list(dict.fromkeys(t for m in modules for t in covering(m)))
    digest = hashlib.sha256(" ".join(modules).encode()).hexdigest()[:10]
    folder = ROOT / "runs" / "mutmut" / digest
    earlier = outcomes(folder) if args.survivors and folder.is_dir() else {}
    rerun = sorted(name for name, outcome in earlier.items() if outcome != "killed")
    if args.survivors and not rerun:
        sys.exit(f"mutmut_run: --survivors: no earlier run of {' '.join(modules)} left any")
    if folder.exists() and not (args.keep or args.survivors):
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    copy_project(folder, project_files())
    with open(folder / "pyproject.toml", "a", encoding="utf-8") as f:
        section = mutmut_section(modules, selected, args.timeout_multiplier)
        f.write(section + ("debug = true\n" if args.debug else ""))
    # On PYTHONPATH before mutmut fills it: a folder missing when Python starts is never searched.
    (folder / "mutants").mkdir(exist_ok=True)
    print(
        f"mutmut over {' '.join(modules)}",
        f"tests: {' '.join(selected)}",
        f"in {folder}",
        sep="\n  ",
        flush=True,
    )
    started = time.monotonic()
    done = subprocess.run(
        [str(MUTMUT), "run", "--max-children", str(args.jobs), *rerun],
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
    found = outcomes(folder)
    if rerun:
        found = merged(earlier, found, rerun)
        print(f"reran the {len(rerun)} mutants the last run left; its kills stand")
    for module, counts in sorted(scores(found).items()):
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
