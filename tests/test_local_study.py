"""The local study executor on the fake trainer: search, failure rules, early stopping, resume."""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pytest

from pipelines.jobs.worker_pools import trial_worker_pool_specs
from pipelines.study import sampler
from pipelines.study import trials as tl
from pipelines.study.search_space import Parameter, SearchSpace, SearchSpaceError
from pipelines.study.trials import TrialState
from pipelines.targets.local import local_study
from pipelines.targets.local.local_study import StudyError, run_study
from tests.conftest import ROOT
from tests.fake_trainer import epoch_value, objective

FAKE = str(ROOT / "tests" / "fake_trainer.py")
optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACE = SearchSpace(
    parameters=(
        Parameter("learning_rate", "double", min=1e-4, max=1.0, scale="log"),
        Parameter("momentum", "double", min=0.0, max=1.0, scale="linear"),
        Parameter("num_units", "discrete", values=(32, 64, 128, 256, 512)),
    )
)
MIXED = SearchSpace(
    parameters=(
        Parameter("learning_rate", "double", min=1e-3, max=1.0, scale="log"),
        Parameter("momentum", "double", min=0.5, max=0.999, scale="reverse_log"),
        Parameter("layers", "integer", min=1, max=4, scale="linear"),
        Parameter("num_units", "discrete", values=(64, 128, 512)),
        Parameter(
            "optimizer",
            "categorical",
            values=("sgd", "adam"),
            conditional=(
                Parameter("nesterov", "categorical", values=("yes", "no"), parent_values=("sgd",)),
            ),
        ),
    )
)


def fake_specs(*args: str) -> list[dict]:
    return trial_worker_pool_specs(image_uri="local", command=["python", FAKE], args=list(args))


def study(tmp_path: Path, *fake_args: str, space: SearchSpace = SPACE, **options) -> list[dict]:
    options.setdefault("max_trial_count", 4)
    options.setdefault("parallel_trial_count", 2)
    options.setdefault("seed", 0)
    options.setdefault("show_progress", False)
    return run_study(
        worker_pool_specs=fake_specs(*fake_args),
        study_spec_metrics=space.to_study_spec_metrics(),
        study_spec_parameters=space.to_study_spec_parameters(),
        base_output_directory=str(tmp_path / "study"),
        **options,
    )


def ledger(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def states(trials: list[dict]) -> list[TrialState]:
    return [tl.trial_state(t) for t in trials]


# --- one study through real subprocesses ----------------------------------------------------------


def test_study_runs_trials_as_vertex_would(tmp_path):
    book = tmp_path / "ledger.jsonl"
    progress: list[local_study.StudyProgress] = []
    trials = study(
        tmp_path,
        "--epochs=3",
        f"--ledger={book}",
        space=MIXED,
        max_trial_count=6,
        study_spec_algorithm="RANDOM_SEARCH",
        on_progress=progress.append,
    )
    base = tmp_path / "study"
    assert [t["id"] for t in trials] == ["1", "2", "3", "4", "5", "6"]
    assert states(trials) == [TrialState.SUCCEEDED] * 6
    assert tl.read_trials(str(base / "trials.json")) == trials
    by_trial = {r["trial"]: r for r in ledger(book)}
    assert sorted(by_trial, key=int) == ["1", "2", "3", "4", "5", "6"]
    for trial in trials:
        tl.validate_trial(trial)  # strict aiplatform_v1.Trial parse
        params = tl.trial_parameters(trial)
        seen = by_trial[trial["id"]]
        # What the trainer got as --flags is what the trial records (types honoured).
        assert seen["params"] == params
        assert type(seen["params"]["layers"]) is int  # passed as --layers=3, not 3.0
        assert type(seen["params"]["num_units"]) is int
        assert isinstance(params["layers"], int) and 1 <= params["layers"] <= 4
        assert isinstance(params["num_units"], int) and params["num_units"] in (64, 128, 512)
        assert 1e-3 <= params["learning_rate"] <= 1.0
        assert 0.5 <= params["momentum"] <= 0.999
        assert params["optimizer"] in ("sgd", "adam")
        assert ("nesterov" in params) == (params["optimizer"] == "sgd")
        env = seen["env"]
        tid = trial["id"]
        assert env["CLOUD_ML_TRIAL_ID"] == tid
        assert env["CLOUD_ML_HP_METRIC_FILE"] == f"{base}/{tid}/local/hypertune.metrics"
        assert env["AIP_MODEL_DIR"] == f"{base}/{tid}/model/"
        assert json.loads(env["CLUSTER_SPEC"])["task"]["trial"] == tid
        assert list(json.loads(env["TF_CONFIG"])["cluster"]) == ["chief"]
        # The metric comes from the hypertune file: 3 measurements, best = last here.
        assert [m["stepCount"] for m in trial["measurements"]] == ["1", "2", "3"]
        assert trial["finalMeasurement"]["stepCount"] == "3"
        expected = epoch_value(params, 3)
        assert math.isclose(tl.final_metric(trial, "val_accuracy"), expected, rel_tol=1e-6)
        assert (base / tid / "local" / "chief-0.log").exists()
    assert progress[-1].done == 6 and progress[-1].total == 6
    assert max(p.running for p in progress) == 2  # parallel_trial_count
    assert (
        progress[-1].best["id"]
        == max(trials, key=lambda t: tl.final_metric(t, "val_accuracy"))["id"]
    )
    summary = json.loads((base / "study.json").read_text())
    assert summary["state"] == "SUCCEEDED" and "max_trial_count=6 reached" in summary["stopReason"]


@pytest.mark.parametrize(
    ("selection", "step"), [("BEST_MEASUREMENT", "2"), ("LAST_MEASUREMENT", "4")]
)
def test_measurement_selection(tmp_path, selection, step):
    trials = study(
        tmp_path,
        "--epochs=4",
        "--decay_after=2",  # rises to epoch 2, then falls: over-training
        max_trial_count=1,
        parallel_trial_count=1,
        study_spec_measurement_selection_type=selection,
    )
    assert trials[0]["finalMeasurement"]["stepCount"] == step


def test_the_final_measurement_carries_the_cost_reported_once_with_the_last_step(tmp_path):
    """BEST_MEASUREMENT picks epoch 2; the cost, reported with epoch 4, is in it all the same."""
    (trial,) = study(
        tmp_path,
        "--epochs=4",
        "--decay_after=2",
        "--cost",
        max_trial_count=1,
        parallel_trial_count=1,
        study_spec_measurement_selection_type="BEST_MEASUREMENT",
    )
    units = tl.trial_parameters(trial)["num_units"]
    assert trial["finalMeasurement"]["stepCount"] == "2"
    assert tl.final_metric(trial, "model_size_mb") == pytest.approx(units / 100)
    assert tl.final_metric(trial, "latency_ms") == pytest.approx(1 + units / 64)
    last = trial["measurements"][-1]
    assert last["stepCount"] == "4" and "latency_ms" in tl.measurement_metrics(last)
    tl.validate_trial(trial)


# --- the search -----------------------------------------------------------------------------------


def sample(space: SearchSpace, algorithm: str, n: int, seed: int = 0) -> list[dict]:
    s = optuna.create_study(direction="maximize", sampler=sampler.make_sampler(algorithm, seed, n))
    out = []
    for _ in range(n):
        trial = s.ask()
        params = sampler.suggest(trial, space.parameters)
        s.tell(trial, objective(params))
        out.append(params)
    return out


def test_scales_and_types_are_honoured_by_the_sampler():
    params = sample(MIXED, "RANDOM_SEARCH", 600)
    lrs = [p["learning_rate"] for p in params]
    assert min(lrs) >= 1e-3 and max(lrs) <= 1.0
    # log: uniform in log10 space → median near 10**-1.5, far below the linear midpoint 0.5
    assert 0.015 < statistics.median(lrs) < 0.07
    momenta = [p["momentum"] for p in params]
    assert min(momenta) >= 0.5 and max(momenta) <= 0.999
    # reverse_log: samples crowd at the top: median above the linear midpoint 0.7495
    # (in theory 1.499 - sqrt(0.5 * 0.999) = 0.792)
    assert statistics.median(momenta) > 0.76
    assert sum(m > 0.9 for m in momenta) > sum(m < 0.6 for m in momenta) * 1.5
    assert {p["layers"] for p in params} == {1, 2, 3, 4}
    assert all(type(p["layers"]) is int and type(p["num_units"]) is int for p in params)
    assert {p["num_units"] for p in params} == {64, 128, 512}
    assert all(("nesterov" in p) == (p["optimizer"] == "sgd") for p in params)


def test_reverse_log_maps_back_and_forth():
    p = MIXED.parameters[1]
    for x in (0.5, 0.9, 0.999):
        assert math.isclose(sampler.to_external(p, sampler.to_internal(p, x)), x)


def test_tpe_beats_random_search_on_average_within_the_same_budget():
    budget, seeds = 30, range(8)

    def best(algorithm: str, seed: int) -> float:
        return max(objective(p) for p in sample(SPACE, algorithm, budget, seed))

    tpe = [best("ALGORITHM_UNSPECIFIED", s) for s in seeds]
    rnd = [best("RANDOM_SEARCH", s) for s in seeds]
    assert statistics.mean(tpe) > statistics.mean(rnd) + 0.1
    assert sum(a > b for a, b in zip(tpe, rnd, strict=True)) >= 6


@pytest.mark.parametrize("algorithm", ["ALGORITHM_UNSPECIFIED", "RANDOM_SEARCH"])
def test_a_short_study_tries_every_categorical_value_first(algorithm):
    for seed in range(6):
        units = [p["num_units"] for p in sample(SPACE, algorithm, 5, seed)]
        assert sorted(units) == [32, 64, 128, 256, 512], (seed, units)  # 5 values, 5 trials
        first = sample(MIXED, algorithm, 3, seed)
        assert {p["num_units"] for p in first} == {64, 128, 512}  # each parameter balanced
        assert {p["optimizer"] for p in first} == {"sgd", "adam"}
    assert sample(MIXED, algorithm, 6, seed=3) == sample(MIXED, algorithm, 6, seed=3)


def test_after_the_start_up_tpe_takes_over_from_the_balanced_draws():
    units = [p["num_units"] for p in sample(SPACE, "ALGORITHM_UNSPECIFIED", 30, seed=0)]
    assert sorted(units[:5]) == [32, 64, 128, 256, 512]
    best = max(set(units[5:]), key=units[5:].count)
    assert best == 128 and units[5:].count(128) > 10  # the fake objective's optimum


def test_a_resumed_study_goes_on_covering_the_values_it_has_not_tried(tmp_path):
    first = study(tmp_path, "--epochs=1", max_trial_count=2, parallel_trial_count=1)
    more = study(tmp_path, "--epochs=1", max_trial_count=5, parallel_trial_count=1)
    assert more[:2] == first
    assert sorted(tl.trial_parameters(t)["num_units"] for t in more) == [32, 64, 128, 256, 512]


def test_grid_covers_the_grid_once_and_ends_there(tmp_path):
    space = SearchSpace(
        parameters=(
            Parameter("layers", "integer", min=1, max=3, scale="linear"),
            Parameter("optimizer", "categorical", values=("sgd", "adam")),
        )
    )
    trials = study(
        tmp_path,
        "--epochs=1",
        space=space,
        max_trial_count=10,
        parallel_trial_count=3,
        study_spec_algorithm="GRID_SEARCH",
    )
    points = sorted((t["layers"], t["optimizer"]) for t in map(tl.trial_parameters, trials))
    assert points == sorted((n, o) for n in (1, 2, 3) for o in ("sgd", "adam"))
    summary = json.loads((tmp_path / "study" / "study.json").read_text())
    assert summary["stopReason"] == "all 6 grid points tried"


def test_grid_points_expand_conditional_children():
    points = sampler.grid_points(MIXED.parameters[2:])  # layers × units × optimizer(+nesterov)
    assert len(points) == 4 * 3 * 3
    assert {"layers": 1, "num_units": 64, "optimizer": "adam"} in points
    assert {"layers": 1, "num_units": 64, "optimizer": "sgd", "nesterov": "no"} in points


def test_grid_with_a_double_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(SearchSpaceError, match="'learning_rate': a double has no finite set"):
        study(tmp_path, study_spec_algorithm="GRID_SEARCH")
    assert not (tmp_path / "study" / "1").exists()


# --- failures -------------------------------------------------------------------------------------


def test_first_trial_failing_stops_the_study(tmp_path):
    with pytest.raises(StudyError, match="the first trial failed") as err:
        study(
            tmp_path,
            "--epochs=3",
            "--sleep=0.2",
            "--fail_at=1",
            "--fail_trials=1",
            max_trial_count=10,
            parallel_trial_count=2,
        )
    assert "exited with code 3" in str(err.value)
    trials = tl.read_trials(str(tmp_path / "study" / "trials.json"))
    assert len(trials) == 2  # trial 2 was running alongside; nothing more started
    first = trials[0]
    assert tl.trial_state(first) == TrialState.INFEASIBLE
    assert (
        "replica chief-0 (workerpool0, replica 0) exited with code 3" in first["infeasibleReason"]
    )
    assert "failing at epoch 1" in first[tl.LOCAL_KEY]["logTail"]
    assert first[tl.LOCAL_KEY]["exitCode"] == 3
    summary = json.loads((tmp_path / "study" / "study.json").read_text())
    assert summary["state"] == "FAILED" and "first trial failed" in summary["stopReason"]


def test_reaching_max_failed_trials_stops_the_study(tmp_path):
    with pytest.raises(StudyError, match="3 trials failed, reaching max_failed_trial_count=3"):
        study(
            tmp_path,
            "--epochs=1",
            "--fail_at=1",
            "--fail_trials=1,3,4,5,6",
            max_trial_count=10,
            parallel_trial_count=1,
            max_failed_trial_count=3,
        )
    trials = tl.read_trials(str(tmp_path / "study" / "trials.json"))
    # trial 1 failing does not stop it when max_failed_trial_count is set (Vertex's docs);
    # two failures are tolerated, the third fails the study.
    assert (
        states(trials)
        == [TrialState.INFEASIBLE, TrialState.SUCCEEDED] + [TrialState.INFEASIBLE] * 2
    )


def test_no_metric_and_timeouts_fail_the_trial_with_the_reason(tmp_path):
    (trial,) = study(tmp_path / "a", "--no_report", max_trial_count=1, max_failed_trial_count=2)
    assert tl.trial_state(trial) == TrialState.INFEASIBLE
    assert "reported no val_accuracy metric" in trial["infeasibleReason"]
    assert "fake_trainer: chief" in trial[tl.LOCAL_KEY]["logTail"]
    (trial,) = study(
        tmp_path / "b",
        "--hang_at=1",
        max_trial_count=1,
        max_failed_trial_count=2,
        trial_timeout=0.5,
    )
    assert "timed out" in trial["infeasibleReason"]
    (trial,) = study(
        tmp_path / "c", "--metric_tag=val_loss", max_trial_count=1, max_failed_trial_count=2
    )
    assert "reported no val_accuracy metric" in trial["infeasibleReason"]
    assert "metrics seen: val_loss" in trial["infeasibleReason"]


# --- early stopping -------------------------------------------------------------------------------


def test_early_stopping_stops_bad_trials(tmp_path):
    trials = study(
        tmp_path,
        "--epochs=5",
        "--sleep=0.15",
        max_trial_count=8,
        parallel_trial_count=1,
        study_spec_algorithm="RANDOM_SEARCH",
        early_stopping=local_study.EarlyStopping(min_trials=2, warmup_steps=1),
        seed=3,
    )
    stopped = [t for t in trials if t[tl.LOCAL_KEY]["earlyStopped"]]
    full = [t for t in trials if not t[tl.LOCAL_KEY]["earlyStopped"]]
    assert stopped, "nothing was stopped early"
    assert all(tl.trial_state(t) == TrialState.SUCCEEDED for t in trials)
    for trial in stopped:
        step = int(trial["finalMeasurement"]["stepCount"])
        assert step < 5
        # it was below the median of the finished trials at that step
        earlier = [t for t in full if int(t["id"]) < int(trial["id"])]
        at_step = [
            tl.measurement_metrics(t["measurements"][step - 1])["val_accuracy"] for t in earlier
        ]
        assert tl.final_metric(trial, "val_accuracy") < statistics.median(at_step)
    assert all(t["finalMeasurement"]["stepCount"] == "5" for t in full)


def test_without_early_stopping_every_trial_runs_to_the_end(tmp_path):
    trials = study(tmp_path, "--epochs=3", max_trial_count=4, study_spec_algorithm="RANDOM_SEARCH")
    assert all(t["finalMeasurement"]["stepCount"] == "3" for t in trials)


# --- resume ---------------------------------------------------------------------------------------


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line contains `text` (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir() if Path("/proc/self").exists() else []:
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_text(errors="replace"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


RUNNER = textwrap.dedent(
    """
    import json, sys
    from pipelines.targets.local.local_study import run_study
    run_study(**json.load(open(sys.argv[1])), show_progress=False)
    """
)


def test_resume_after_the_executor_is_killed_never_reruns_a_finished_trial(tmp_path):
    book = tmp_path / "ledger.jsonl"
    base = tmp_path / "study"
    payload = {
        "worker_pool_specs": fake_specs("--epochs=3", "--sleep=0.15", f"--ledger={book}"),
        "study_spec_metrics": SPACE.to_study_spec_metrics(),
        "study_spec_parameters": SPACE.to_study_spec_parameters(),
        "max_trial_count": 10,
        "parallel_trial_count": 2,
        "base_output_directory": str(base),
        "seed": 0,
    }
    payload_file = tmp_path / "payload.json"
    payload_file.write_text(json.dumps(payload))
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(payload_file)], cwd=ROOT, stderr=subprocess.DEVNULL
    )
    trials_file = base / "trials.json"
    deadline = time.monotonic() + 60
    finished_before: list[dict] = []
    while time.monotonic() < deadline and len(finished_before) < 3:
        time.sleep(0.05)
        if trials_file.exists():
            current = tl.read_trials(str(trials_file))
            finished_before = [t for t in current if tl.trial_state(t) == TrialState.SUCCEEDED]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    at_kill = tl.read_trials(str(trials_file))
    finished_ids = {t["id"] for t in at_kill if tl.trial_state(t) == TrialState.SUCCEEDED}
    assert 3 <= len(finished_ids) < 10, "kill the study mid-way"
    time.sleep(0.2)
    assert not processes_mentioning(str(book)), "trial processes outlived the executor"

    trials = run_study(**payload, show_progress=False)

    assert [t["id"] for t in trials] == [str(i) for i in range(1, 11)]
    assert states(trials) == [TrialState.SUCCEEDED] * 10
    runs = ledger(book)
    counts = {tid: sum(r["trial"] == tid for r in runs) for tid in {r["trial"] for r in runs}}
    assert all(counts[tid] == 1 for tid in finished_ids), counts  # no finished trial ran again
    assert set(counts) == {t["id"] for t in trials}
    for t in trials:  # an interrupted trial came back with the same parameters
        assert all(r["params"] == tl.trial_parameters(t) for r in runs if r["trial"] == t["id"])
    for t in at_kill:
        assert tl.trial_parameters(t) == tl.trial_parameters(trials[int(t["id"]) - 1])

    # Running once more changes nothing: every trial is finished.
    assert run_study(**payload, show_progress=False) == trials
    assert len(ledger(book)) == len(runs)


def test_resume_can_raise_the_trial_budget_but_not_change_the_space(tmp_path):
    first = study(tmp_path, "--epochs=1", max_trial_count=2, study_spec_algorithm="RANDOM_SEARCH")
    more = study(tmp_path, "--epochs=1", max_trial_count=4, study_spec_algorithm="RANDOM_SEARCH")
    assert more[:2] == first and len(more) == 4
    assert tl.trial_parameters(more[2]) not in [tl.trial_parameters(t) for t in first]
    with pytest.raises(StudyError, match="already holds a different study"):
        study(
            tmp_path,
            "--epochs=1",
            max_trial_count=4,
            study_spec_algorithm="GRID_SEARCH",
            space=SearchSpace(parameters=(Parameter("n", "integer", min=1, max=2),)),
        )


def test_bad_counts_are_refused(tmp_path):
    with pytest.raises(StudyError, match="parallel_trial_count=0: expected >= 1"):
        study(tmp_path, parallel_trial_count=0)
    with pytest.raises(StudyError, match="needs a local path"):
        run_study(
            worker_pool_specs=fake_specs(),
            study_spec_metrics=SPACE.to_study_spec_metrics(),
            study_spec_parameters=SPACE.to_study_spec_parameters(),
            max_trial_count=1,
            parallel_trial_count=1,
            base_output_directory="gs://bucket/hpt",
        )


def test_the_same_seed_proposes_the_same_trials_and_another_seed_does_not(tmp_path):
    def proposals(folder: str, seed: int) -> list[dict]:
        trials = study(tmp_path / folder, "--epochs=1", seed=seed, parallel_trial_count=1)
        return [tl.trial_parameters(t) for t in trials]

    first = proposals("a", 7)
    assert proposals("b", 7) == first
    assert proposals("c", 8) != first
