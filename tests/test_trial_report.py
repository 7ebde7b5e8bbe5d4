"""Trial report: loading trials (local, Vertex offline), table order, plots and the CLI."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from PIL import Image
from typer.testing import CliRunner

from pipelines.app import report_commands as report_cli
from pipelines.reports import trial_plots, trial_report
from pipelines.study import search_space
from pipelines.study import trials as trials_lib
from pipelines.study.continuation import ORIGIN_SEP
from pipelines.study.search_space import Metric

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
HPT_JOB = "projects/proj/locations/us-central1/hyperparameterTuningJobs/42"
S = trials_lib.TrialState


def _trial(
    trial_id: str,
    state: S,
    params: dict[str, Any],
    curve: list[tuple[float, float]],
    *,
    seconds: float | None,
    reason: str = "",
    local: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A trial whose per-epoch (val_accuracy, val_loss) are `curve`; final: the last if it ended."""
    measurements = [
        trials_lib.measurement(step, {"val_accuracy": acc, "val_loss": loss})
        for step, (acc, loss) in enumerate(curve, start=1)
    ]
    start = T0 + 100 * int(trial_id)
    return trials_lib.make_trial(
        trial_id,
        params,
        state=state,
        final_measurement=measurements[-1] if state == S.SUCCEEDED else None,
        measurements=measurements,
        start_time=trials_lib.timestamp(start),
        end_time=trials_lib.timestamp(start + seconds) if seconds is not None else None,
        infeasible_reason=reason,
        local=local,
    )


def make_trials() -> list[dict[str, Any]]:
    return [
        _trial("1", S.SUCCEEDED, {"learning_rate": 0.001, "num_units": 64, "optimizer": "sgd"},
               [(0.5, 1.2), (0.7, 0.9)], seconds=30.0, local={"precision": "mixed_bfloat16"}),
        _trial("2", S.SUCCEEDED, {"learning_rate": 0.1, "num_units": 128, "optimizer": "adam"},
               [(0.6, 1.0), (0.9, 0.3)], seconds=90.0),
        _trial("3", S.INFEASIBLE, {"learning_rate": 0.5, "num_units": 512, "optimizer": "adam"},
               [(0.1, 2.0)], seconds=5.25, reason="exit code 1: out of memory"),
        _trial("4", S.SUCCEEDED, {"learning_rate": 0.01, "num_units": 512, "optimizer": "adam"},
               [(0.8, 0.5)], seconds=3725.0, local={"earlyStopped": True}),
        _trial("5", S.ACTIVE, {"learning_rate": 0.05, "num_units": 64, "optimizer": "sgd"},
               [(0.4, 1.5)], seconds=None),
    ]  # fmt: skip


def write_study(folder: Path, trials: list[dict[str, Any]], goal: str = "MAXIMIZE") -> Path:
    """A local study folder: trials.json and study.json (its metric spec)."""
    folder.mkdir(parents=True, exist_ok=True)
    trials_lib.write_trials(str(folder / trials_lib.TRIALS_FILE), trials)
    spec = {"studySpec": {"metrics": [{"metric_id": "val_accuracy", "goal": goal}]}}
    (folder / trial_report.STUDY_FILE).write_text(json.dumps(spec))
    return folder


def write_run(output: Path, name: str, trials: list[dict[str, Any]]) -> Path:
    """A run folder whose tune-locally task wrote `trials` and points at the output's study."""
    task = output / "artifacts" / name / "tune-locally"
    task.mkdir(parents=True)
    trials_lib.write_trials(str(task / "trials"), trials)
    artifact = {
        "name": "trials",
        "uri": str(task / "trials"),
        "metadata": {"study": str(output / "study")},
    }
    payload = {"artifacts": {"trials": {"artifacts": [artifact]}}}
    (task / "executor_output.json").write_text(json.dumps(payload))
    return task.parent


@pytest.fixture
def output(tmp_path: Path) -> Path:
    """An --output folder: the study (minimizing nothing: val_accuracy, maximized) and two runs."""
    out = tmp_path / "out"
    write_study(out / "study", make_trials())
    write_run(out, "hpt-pipeline-2026-01-01-00-00-00-000000", make_trials()[:2])
    write_run(out, "hpt-pipeline-2026-01-02-00-00-00-000000", make_trials())
    return out


def _ids(rows: list[trial_report.TrialRow]) -> list[str]:
    return [r.trial_id for r in rows]


# --------------------------------------------------------------------------- the table


def test_rows_follow_the_metric_and_the_goal():
    trials = make_trials()
    assert _ids(trial_report.trial_rows(trials, Metric("val_accuracy", "maximize"))) == [
        "2", "4", "1", "3", "5"
    ]  # fmt: skip
    assert _ids(trial_report.trial_rows(trials, Metric("val_accuracy", "minimize"))) == [
        "1", "4", "2", "3", "5"
    ]  # fmt: skip
    by_loss = trial_report.trial_rows(trials, Metric("val_loss", "minimize"))
    assert _ids(by_loss) == ["2", "4", "1", "3", "5"]
    assert [r.metric for r in by_loss] == [0.3, 0.5, 0.9, None, None]


def test_durations_come_from_the_timestamps():
    rows = {r.trial_id: r for r in trial_report.trial_rows(make_trials(), Metric("val_accuracy"))}
    assert rows["2"].seconds == pytest.approx(90.0)
    assert rows["3"].seconds == pytest.approx(5.25)
    assert rows["5"].seconds is None  # still running: no end time
    assert trial_report.format_duration(rows["3"].seconds) == "5.2 s"
    assert trial_report.format_duration(rows["2"].seconds) == "1 min 30 s"
    assert trial_report.format_duration(rows["4"].seconds) == "1 h 02 min"
    nanos = {"startTime": "2026-01-01T00:00:00.250000000Z", "endTime": "2026-01-01T00:00:01Z"}
    assert trial_report.duration_seconds(nanos) == pytest.approx(0.75)


def test_failed_trials_keep_their_state_and_reason():
    rows = {r.trial_id: r for r in trial_report.trial_rows(make_trials(), Metric("val_accuracy"))}
    assert rows["3"].state == "INFEASIBLE" and rows["3"].metric is None
    assert rows["3"].note == "exit code 1: out of memory"
    assert rows["5"].state == "ACTIVE"
    assert rows["4"].note == "early stopped"


def test_log_axis_only_for_parameters_spanning_orders_of_magnitude():
    assert trial_plots.wants_log_axis([0.001, 0.1, 0.01])
    assert not trial_plots.wants_log_axis([64, 128, 512])
    assert not trial_plots.wants_log_axis([0.0, 0.5, 1.0])
    assert not trial_plots.wants_log_axis(["sgd", "adam"])


def test_discrete_and_categorical_parameters_get_one_tick_per_value():
    labels = trial_plots.category_labels
    # a discrete parameter: its distinct values in numeric order, 64.0 (a payload) shown as 64
    assert labels([128, 64.0, 512, 64], "discrete") == ["64", "128", "512"]
    assert labels([64, 64, 64], "discrete") == ["64"]
    assert labels([0.5, 0.25], "discrete") == ["0.25", "0.5"]
    assert labels(["sgd", "adam", "sgd"], "categorical") == ["adam", "sgd"]
    assert labels([0.001, 0.01], "double") is None
    assert labels([1, 2], "double") is None  # a double stays continuous, even on round values
    # an integer parameter: categories while few, a numeric axis past MAX_CATEGORIES
    assert labels([3, 1, 2], "integer") == ["1", "2", "3"]
    assert labels(list(range(trial_plots.MAX_CATEGORIES + 1)), "integer") is None
    # without the study's spec: by the values
    assert labels([64, 128.0]) == ["64", "128"]
    assert labels([0.1, 0.2]) is None
    assert labels(["adam"]) == ["adam"]


def _parameter_axes(trials, types=None):
    fig = trial_plots.parameters_figure(trials, Metric("val_accuracy", "maximize"), types)
    axes = {ax.get_xlabel(): ax for ax in fig.axes if ax.get_xlabel()}
    return fig, axes


def _tick_labels(ax) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels()]


def test_parameter_plot_axes_are_categorical_for_discrete_values():
    from pipelines.reports import plotting

    types = {"learning_rate": "double", "num_units": "discrete", "optimizer": "categorical"}
    fig, axes = _parameter_axes(make_trials(), types)
    try:
        # scored trials 1, 2 and 4 used 64, 128 and 512 units: three ticks, nothing in between
        assert _tick_labels(axes["num_units"]) == ["64", "128", "512"]
        assert list(axes["num_units"].get_xticks()) == [0, 1, 2]
        assert _tick_labels(axes["optimizer"]) == ["adam", "sgd"]
        assert axes["learning_rate"].get_xscale() == "log"  # 0.001 .. 0.1: continuous, log
        # the best trial (2: 128 units, adam) is starred at its category
        best = axes["num_units"].collections[-1].get_offsets()
        assert [tuple(p) for p in best] == [(1.0, 0.9)]
    finally:
        plotting.pyplot().close(fig)


def test_one_discrete_value_gets_one_tick_not_a_continuous_range():
    """All trials picked num_units=64 (as Vertex returns it, 64.0): one tick "64", not 62-66."""
    from pipelines.reports import plotting

    trials = make_trials()
    for t in trials:
        for p in t["parameters"]:
            if p["parameterId"] == "num_units":
                p["value"] = 64.0
    for types in ({"num_units": "discrete"}, None):  # with the study's spec and without
        fig, axes = _parameter_axes(trials, types)
        try:
            assert _tick_labels(axes["num_units"]) == ["64"]
            assert axes["num_units"].get_xlim() == (-0.5, 0.5)
        finally:
            plotting.pyplot().close(fig)


def test_parameter_types_come_from_the_study_spec(output):
    space = search_space.load_search_space("default")
    spec = {
        "studySpec": {
            "metrics": [{"metric_id": "val_accuracy", "goal": "MAXIMIZE"}],
            "parameters": space.to_study_spec_parameters(),
        }
    }
    (output / "study" / trial_report.STUDY_FILE).write_text(json.dumps(spec))
    study = trial_report.load_trials(str(output / "study"))
    assert study.parameter_types == {
        "learning_rate": "double", "momentum": "double", "num_units": "discrete"
    }  # fmt: skip
    assert trial_report.parameter_types([{"no": "spec"}]) == {}  # unreadable: go by values


# --------------------------------------------------------------------------- the report files


def _png(path: Path) -> tuple[int, int]:
    with Image.open(path) as image:
        assert image.format == "PNG"
        image.verify()
        return image.size


def test_report_files_are_valid_images_and_one_page(tmp_path):
    study = trial_report.StudyTrials(make_trials(), "trials.json", None, None)
    report = trial_report.write_report(study, tmp_path / "r", Metric("val_accuracy", "maximize"))

    assert sorted(p.name for p in report.figures.values()) == [
        trial_report.CURVE_PLOT, trial_report.METRIC_PLOT, trial_report.PARAMETER_PLOT
    ]  # fmt: skip
    for path in report.figures.values():
        width, height = _png(path)
        assert width >= 300 and height >= 200
    width, _ = _png(report.figures["parameters"])
    assert width >= 900  # three parameters: three panels side by side

    page = report.page.read_text()
    assert page.count('src="data:image/png;base64,') == 3
    body = page.split("<table>", 1)[1].split("</table>", 1)[0]
    assert body.split("</tr>", 1)[0] == "<tr>" + "".join(
        f"<th>{h}</th>"
        for h in ("trial", "outcome", "val_accuracy", "duration", "precision")
        + ("learning_rate", "num_units", "optimizer", "note")
    )  # the page's table header
    assert "<tr><td>2</td><td>succeeded</td><td>0.9</td><td>1 min 30 s</td>" in body
    first_cells = [row.split("<td>")[1].split("</td>")[0] for row in body.split("<tr")[2:]]
    assert first_cells == ["2", "4", "1", "3", "5"]
    assert '<tr class="failed"><td>3</td><td>failed</td>' in page
    assert "exit code 1: out of memory" in page and "1 min 30 s" in page
    assert "best: trial 2 (val_accuracy 0.9)" in page
    assert "3 succeeded, 1 failed, 1 running" in page  # the page's count of trials per outcome


def test_plots_without_any_metric_still_render(tmp_path):
    failed = [t for t in make_trials() if t["id"] == "3"]
    for t in failed:
        t["measurements"] = []
    study = trial_report.StudyTrials(failed, "x", None, None)
    report = trial_report.write_report(study, tmp_path, Metric("val_accuracy"))
    for path in report.figures.values():
        _png(path)
    assert "no trial reported the metric" in report.page.read_text()


# --------------------------------------------------------------------------- loading


def test_load_from_an_output_folder_takes_its_newest_run(output):
    study = trial_report.load_trials(str(output))
    assert [t["id"] for t in study.trials] == ["1", "2", "3", "4", "5"]
    assert study.source.endswith("2026-01-02-00-00-00-000000/tune-locally/trials")
    assert study.objective == Metric("val_accuracy", "maximize")  # from the study's study.json
    assert trial_report.default_report_dir(study) == study.home / "trial-report"
    assert study.home.name == "hpt-pipeline-2026-01-02-00-00-00-000000"

    older = trial_report.load_trials(
        str(output / "artifacts/hpt-pipeline-2026-01-01-00-00-00-000000")
    )
    assert [t["id"] for t in older.trials] == ["1", "2"]


def test_a_runs_report_holds_the_constraints_its_selection_applied(output):
    """The select step's `summary` names them (what the report's selection line shows)."""
    run = output / "artifacts" / "hpt-pipeline-2026-01-02-00-00-00-000000"
    task = run / "select-best-trial"
    task.mkdir()
    summary = {"name": "summary", "uri": str(task / "summary")}
    summary["metadata"] = {"constraints": ["val_loss<=0.4"]}
    payload = {"artifacts": {"summary": {"artifacts": [summary]}}}
    (task / "executor_output.json").write_text(json.dumps(payload))
    assert trial_report.load_trials(str(run)).constraints == ("val_loss<=0.4",)
    assert trial_report.load_trials(str(output)).constraints == ("val_loss<=0.4",)
    older = output / "artifacts" / "hpt-pipeline-2026-01-01-00-00-00-000000"
    assert trial_report.load_trials(str(older)).constraints == ()  # its own: none recorded


def test_a_trials_file_outside_a_study_and_a_run_without_its_study_or_trials(output, tmp_path):
    """A copied trials.json is reported next to itself; a run's artifact without a study
    still loads; a run whose tuning wrote no trials is named in the one-line error."""
    copied = tmp_path / "copy" / trials_lib.TRIALS_FILE
    copied.parent.mkdir()
    copied.write_text((output / "study" / trials_lib.TRIALS_FILE).read_text())
    assert trial_report.load_trials(str(copied)).home == copied.parent  # not tmp_path

    run = write_run(tmp_path / "bare", "hpt-pipeline-2026-01-03-00-00-00-000000", make_trials())
    written = run / "tune-locally" / "executor_output.json"
    payload = json.loads(written.read_text())
    del payload["artifacts"]["trials"]["artifacts"][0]["metadata"]
    written.write_text(json.dumps(payload))
    study = trial_report.load_trials(str(run))
    assert len(study.trials) == 5 and study.objective is None

    written.write_text(json.dumps({"artifacts": {}}))
    with pytest.raises(trial_report.ReportError) as err:
        trial_report.load_trials(str(run))
    assert str(err.value) == f"{run}: this run has no trials artifact (did tuning finish?)"


@pytest.mark.parametrize("summary", [None, '{"studySpec": []}', "not json"])
def test_a_study_without_a_readable_spec_is_reported_by_its_trials_alone(output, summary):
    """No study.json, a `studySpec` that is no mapping, or no JSON: no goal, no crash."""
    path = output / "study" / trial_report.STUDY_FILE
    path.unlink()
    if summary is not None:
        path.write_text(summary)
    study = trial_report.load_trials(str(output / "study"))
    assert len(study.trials) == 5
    assert (study.objective, study.objectives, study.parameter_types) == (None, (), {})
    metric = trial_report.resolve_metric(study, None, None)
    assert metric == Metric("val_accuracy", "maximize")  # the trainer's goal for it


def test_load_from_a_study_folder_or_a_trials_file(output):
    for run in (output / "study", output / "study" / trials_lib.TRIALS_FILE):
        study = trial_report.load_trials(str(run))
        assert len(study.trials) == 5
        assert study.home == output  # the report goes next to the study, not into it
    write_study(output / "study", make_trials(), goal="MINIMIZE")
    study = trial_report.load_trials(str(output / "study"))
    assert trial_report.resolve_metric(study, None, None) == Metric("val_accuracy", "minimize")


def test_metric_and_goal_resolution():
    study = trial_report.StudyTrials(make_trials(), "x", None, None)
    assert trial_report.resolve_metric(study, None, None) == Metric("val_accuracy", "maximize")
    assert trial_report.resolve_metric(study, "val_loss", "minimize") == Metric(
        "val_loss", "minimize"
    )
    with pytest.raises(trial_report.ReportError, match="goal='sideways'"):
        trial_report.resolve_metric(study, None, "sideways")
    empty = trial_report.StudyTrials([], "x", None, None)
    with pytest.raises(trial_report.ReportError, match="pass --metric"):
        trial_report.resolve_metric(empty, None, None)


def test_bad_run_is_rejected(tmp_path):
    with pytest.raises(trial_report.ReportError, match="not a local run"):
        trial_report.load_trials(str(tmp_path / "missing"))
    with pytest.raises(trial_report.ReportError, match="not a local run"):
        trial_report.load_trials(str(tmp_path))  # exists, but holds no run
    assert trial_report.hpt_job_name("42", "proj", "us-central1") == HPT_JOB
    assert trial_report.hpt_job_name("42") is None
    # A job id needs both: with the project alone it is no job (not `locations/None`).
    assert trial_report.hpt_job_name("42", "proj", None) is None


# --------------------------------------------------------------------------- Vertex, offline


def _hpt_job(name: str) -> Any:
    from google.cloud.aiplatform_v1.types import HyperparameterTuningJob, StudySpec, Trial

    trials = [Trial.from_json(json.dumps(t), ignore_unknown_fields=True) for t in make_trials()]
    metric = StudySpec.MetricSpec(metric_id="val_loss", goal=StudySpec.MetricSpec.GoalType.MINIMIZE)
    P = StudySpec.ParameterSpec
    units = P(
        parameter_id="num_units", discrete_value_spec=P.DiscreteValueSpec(values=[64, 128, 512])
    )
    rate = P(
        parameter_id="learning_rate",
        double_value_spec=P.DoubleValueSpec(min_value=1e-4, max_value=0.5),
        scale_type=P.ScaleType.UNIT_LOG_SCALE,
    )
    spec = StudySpec(metrics=[metric], parameters=[units, rate])
    return HyperparameterTuningJob(name=name, display_name="study", study_spec=spec, trials=trials)


@pytest.fixture
def vertex_job(monkeypatch):
    """Stand in for JobServiceClient.get_hyperparameter_tuning_job; returns the requests."""
    from google.cloud.aiplatform_v1.services.job_service import JobServiceClient

    requests: list[str] = []

    def get(self, request=None, *, name, **_):
        requests.append(name)
        return _hpt_job(name)

    monkeypatch.setattr(JobServiceClient, "get_hyperparameter_tuning_job", get)
    return requests


def test_trials_of_a_vertex_hpt_job(vertex_job):
    from google.auth.credentials import AnonymousCredentials

    study = trial_report.load_trials(HPT_JOB, credentials=AnonymousCredentials())
    assert set(vertex_job) == {HPT_JOB}
    assert study.source == HPT_JOB and study.home is None
    assert study.objective == Metric("val_loss", "minimize")
    assert study.objectives == (Metric("val_loss", "minimize"),)  # `--metric`'s goal comes from it
    assert study.parameter_types == {"num_units": "discrete", "learning_rate": "double"}
    assert study.parameter_scales == {"learning_rate": "log"}  # its plot axis: log, as searched
    assert [t["state"] for t in study.trials] == [4, 4, 5, 4, 2]
    rows = trial_report.trial_rows(study.trials, trial_report.resolve_metric(study, None, None))
    assert _ids(rows) == ["2", "4", "1", "3", "5"]
    assert rows[0].seconds == pytest.approx(90.0)
    assert trial_report.default_report_dir(study) == Path("trial-report-42")


# --------------------------------------------------------------------------- the CLI


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("trials")(report_cli.trials)
    app.command("lineage")(report_cli.lineage)
    return app


def test_cli_prints_the_table_and_where_the_report_went(output, tmp_path):
    report_dir = tmp_path / "report"
    args = [
        "trials",
        str(output),
        "--output",
        str(report_dir),
        "--metric",
        "val_loss",
        "--goal",
        "minimize",
    ]
    result = CliRunner().invoke(_app(), args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    table_ids = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    assert table_ids == ["2", "4", "1", "3", "5"]
    assert " failed " in result.stdout and "sorted by val_loss (minimize)" in result.stdout
    assert f"wrote {report_dir / trial_report.PAGE}" in result.stdout
    assert (report_dir / trial_report.METRIC_PLOT).is_file()


@pytest.mark.parametrize("format", ["table", "json"])
def test_trials_by_val_loss_on_an_accuracy_study_shows_the_lowest_loss_first(output, format):
    """`trials --metric val_loss` without `--goal`: a loss is minimized, whatever the study's."""
    args = ["trials", str(output), "--metric", "val_loss", "--format", format]
    if format == "table":
        args += ["--output", str(output / "report")]
    result = CliRunner().invoke(_app(), args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    if format == "json":
        data = json.loads(result.stdout)
        assert data["metric"] == {"metricId": "val_loss", "goal": "minimize"}
        ids = [t["id"] for t in data["trials"]]
    else:
        assert "sorted by val_loss (minimize)" in result.stdout
        ids = [
            line.split("│")[1].strip()
            for line in result.stdout.splitlines()
            if line.startswith("│")
        ]
    assert ids == ["2", "4", "1", "3", "5"]  # losses 0.3, 0.5, 0.9, then the unfinished


def test_a_goal_comes_from_the_study_then_the_trainer_then_maximize():
    study = trial_report.StudyTrials(
        make_trials(), "x", Metric("val_accuracy"), None,
        objectives=(Metric("val_accuracy"), Metric("f1", "minimize")),
    )  # fmt: skip
    assert trial_report.resolve_metric(study, "f1", None) == Metric("f1", "minimize")
    assert trial_report.resolve_metric(study, "latency_ms", None).goal == "minimize"
    assert trial_report.resolve_metric(study, "team_score", None).goal == "maximize"
    assert trial_report.resolve_metric(study, "val_loss", "maximize").goal == "maximize"
    losses_first = [dict(t, finalMeasurement=trials_lib.measurement(1, {"val_loss": 0.2}))
                    for t in make_trials()[:1]]  # fmt: skip
    bare = trial_report.StudyTrials(losses_first, "trials.json", None, None)
    assert trial_report.resolve_metric(bare, None, None) == Metric("val_loss", "minimize")


def test_cli_vertex_job_id(vertex_job, monkeypatch, tmp_path):
    from google.auth.credentials import AnonymousCredentials

    from pipelines.targets.vertex import client as vertex_client

    monkeypatch.setattr(vertex_client, "credentials", lambda offline: AnonymousCredentials())
    monkeypatch.chdir(tmp_path)
    args = ["trials", "42", "--project", "proj", "--region", "us-central1"]
    result = CliRunner().invoke(_app(), args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert set(vertex_job) == {HPT_JOB}
    assert (tmp_path / "trial-report-42" / trial_report.PAGE).is_file()


@pytest.mark.parametrize(
    "args",
    [
        ["trials", "no/such/run"],
        ["trials", "projects/p/locations/l/pipelineJobs/1"],
        ["trials", "artifacts"],  # a folder, but no run
        ["trials", "study", "--goal", "sideways"],
    ],
)
def test_cli_bad_input_is_a_one_line_error(args, output, monkeypatch):
    monkeypatch.chdir(output)
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("hpt-pipeline: error:")
    assert result.stdout == ""


def test_cli_trials_as_json_carry_vertex_trials_and_the_tables_columns(output):
    result = CliRunner().invoke(_app(), ["trials", str(output), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["metric"] == {"metricId": "val_accuracy", "goal": "maximize"}
    assert [t["id"] for t in data["trials"]] == ["2", "4", "1", "3", "5"]  # best first
    for trial in data["trials"]:
        trials_lib.validate_trial({k: v for k, v in trial.items() if k != "row"})  # strict
    best = data["trials"][0]
    assert best["row"]["state"] == "SUCCEEDED"
    assert data["trials"][1]["row"]["note"] == "early stopped"
    assert best["row"]["metric"] == trials_lib.final_metric(best, "val_accuracy")
    assert best["row"]["parameters"] == trials_lib.trial_parameters(best)
    assert [t["row"]["precision"] for t in data["trials"]] == [
        None,
        None,
        "mixed_bfloat16",
        None,
        None,
    ]
    assert not (output / "trial-report").exists()  # data for scripts: no report written


def test_cli_trials_as_csv_have_the_tables_columns(output):
    import csv

    result = CliRunner().invoke(_app(), ["trials", str(output), "--format", "csv"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(result.stdout.splitlines()))
    assert list(rows[0]) == [
        "trial", "state", "val_accuracy", "seconds", "precision", "learning_rate", "num_units",
        "optimizer", "note",
    ]  # fmt: skip
    assert [r["trial"] for r in rows] == ["2", "4", "1", "3", "5"]
    # The precision the trainer resolved (local trials read it from the trial's log).
    assert [r["precision"] for r in rows] == ["", "", "mixed_bfloat16", "", ""]
    assert rows[3]["note"] == "exit code 1: out of memory" and rows[4]["val_accuracy"] == ""


def test_cli_table_keeps_its_columns_when_piped(output, tmp_path):
    # CliRunner's stdout is not a terminal, as `| less` or `> file`; no COLUMNS given.
    args = ["trials", str(output), "--output", str(tmp_path / "r")]
    result = CliRunner().invoke(_app(), args, env={"COLUMNS": None})
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 5  # one line per trial: nothing folded or cut
    assert "exit code 1: out of memory" in result.stdout and "optimizer" in result.stdout
    assert max(len(line) for line in rows) > 80


def test_cli_bad_format_is_a_one_line_error(output):
    result = CliRunner().invoke(_app(), ["trials", str(output), "--format", "xml"])
    assert result.exit_code == 2
    assert result.stderr == "hpt-pipeline: error: --format=xml: expected one of table, csv, json\n"


def test_report_titles_name_the_run_or_job_not_a_path():
    local = "/home/me/runs/latest/artifacts/hpt-pipeline-2026-01-02/tune-locally/trials"
    assert trial_report.title_of(local) == "Trials of hpt-pipeline-2026-01-02"
    assert trial_report.title_of("/home/me/runs/exp1/study/trials.json") == "Trials of exp1"
    job = "projects/1/locations/us-central1/hyperparameterTuningJobs/77"
    assert trial_report.title_of(job) == "Trials of HPT job 77"


def test_a_log_scale_parameter_gets_a_log_axis_even_over_a_short_span():
    trials = [  # learning_rate spans less than the two decades that alone ask for a log axis
        _trial(str(i), S.SUCCEEDED, {"learning_rate": lr, "momentum": m}, [(acc, 0.5)], seconds=1)
        for i, (lr, m, acc) in enumerate([(0.004, 0.8, 0.7), (0.01, 0.85, 0.8), (0.03, 0.9, 0.9)])
    ]
    metric = Metric("val_accuracy", "maximize")
    scales = {"learning_rate": "log", "momentum": "linear"}
    fig = trial_plots.parameters_figure(trials, metric, {}, scales)
    axis = {ax.get_xlabel(): ax.get_xscale() for ax in fig.axes if ax.get_xlabel()}
    assert axis == {"learning_rate": "log", "momentum": "linear"}
    specs = search_space.default_search_space().to_study_spec_parameters()
    declared = trial_report.parameter_types(specs, "scale")  # what the report reads
    assert (declared["learning_rate"], declared["momentum"]) == ("log", "linear")


def test_early_stopped_trials_are_marked_and_the_legend_hides_no_curve(tmp_path, monkeypatch):
    figures: list[Any] = []
    monkeypatch.setattr(trial_plots, "_save", lambda fig, path: figures.append(fig) or path)
    metric = Metric("val_accuracy", "maximize")
    trial_plots.plot_curves(make_trials(), metric, tmp_path / "c.png")
    trial_plots.plot_metric_per_trial(make_trials(), metric, tmp_path / "m.png")
    curves, per_trial = (fig.axes[0] for fig in figures)
    labels = [t.get_text() for t in curves.get_legend().get_texts()]
    assert "trial 4 (early-stopped)" in labels and "trial 1" in labels
    box = curves.get_legend().get_window_extent(figures[0].canvas.get_renderer())
    assert box.x0 >= curves.get_window_extent().x1  # beside the axes, not over the curves
    assert "early-stopped" in [t.get_text() for t in per_trial.get_legend().get_texts()]


def test_the_report_stars_the_trial_the_selection_picks_on_a_tie():
    """Two trials tied at 0.95: selection picks the cheaper one (fewer units); so does the star."""
    from pipelines.reports.trial_plots import best_scored
    from pipelines.study import trials as tl
    from pipelines.study.search_space import Metric
    from pipelines.study.selection import select_best_trial

    params = [{"num_units": 256}, {"num_units": 64}, {"num_units": 128}]
    values = [0.95, 0.95, 0.90]
    trials = [
        tl.make_trial(
            str(i),
            p,
            state=tl.TrialState.SUCCEEDED,
            final_measurement=tl.measurement(3, {"val_accuracy": v}),
        )
        for i, (p, v) in enumerate(zip(params, values, strict=True), start=1)
    ]
    best = select_best_trial(trials, metric_id="val_accuracy", goal="maximize")
    starred = best_scored(
        list(zip(params, values, strict=True)), Metric("val_accuracy", "maximize")
    )
    assert best.trial_id == "2" and starred == ({"num_units": 64}, 0.95)


# --------------------------------------------------------------------------- a running study


def _running_output(tmp_path: Path, *, done: str) -> Path:
    """An --output folder mid-study: trial 1 done, trial 2 at its second epoch, no trials
    artifact of this study yet (`done`: the steps of this run that finished, or an earlier
    run of other settings, whose study was kept)."""
    from pipelines.jobs.local_job import job_local_dir
    from pipelines.study.trial_runner import METRIC_FILE

    out = tmp_path / "out"
    if done == "an-earlier-run":
        write_run(out, "hpt-pipeline-2026-01-01-00-00-00-000000", make_trials())
    done = _trial("1", S.SUCCEEDED, {"num_units": 64}, [(0.5, 1.2), (0.7, 0.9)], seconds=30.0)
    running = trials_lib.make_trial("2", {"num_units": 128}, state=S.ACTIVE, local={"attempts": 1})
    study = write_study(out / "study", [done, running])
    metric_file = Path(job_local_dir(str(study), "2")) / METRIC_FILE
    metric_file.parent.mkdir(parents=True)
    metric_file.write_text(
        "".join(
            json.dumps({"val_accuracy": acc, "global_step": step, "timestamp": T0}) + "\n"
            for step, acc in ((1, 0.4), (2, 0.625))
        )
    )
    if done == "data-step":
        task = out / "artifacts" / "hpt-pipeline-2026-01-03-00-00-00-000000" / "prepare-dataset"
        task.mkdir(parents=True)
        (task / "executor_output.json").write_text(json.dumps({"artifacts": {}}))
    return out


@pytest.mark.parametrize("done", ["data-step", "nothing", "an-earlier-run"])
def test_trials_of_a_running_study_show_its_running_trials_at_their_latest_epoch(tmp_path, done):
    """Issue 51, case 16: `trials runs/X` during a study reports it (was: "did tuning finish?",
    or the earlier run's trials)."""
    out = _running_output(tmp_path, done=done)

    result = CliRunner().invoke(_app(), ["trials", str(out)], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows] == ["1", "2"]
    assert "running" in rows[1] and "epoch 2 so far: val_accuracy 0.625" in rows[1]
    assert f"wrote {out / trial_report.REPORT_DIR / trial_report.PAGE}" in result.stdout


def test_an_output_running_a_study_after_two_runs_shows_it_and_the_older_run_its_own(tmp_path):
    """The newest run (its data step done) reports the running study; the run before it, its
    own five trials, not the study's two."""
    out = _running_output(tmp_path, done="an-earlier-run")
    task = out / "artifacts" / "hpt-pipeline-2026-01-03-00-00-00-000000" / "prepare-dataset"
    task.mkdir(parents=True)
    (task / "executor_output.json").write_text(json.dumps({"artifacts": {}}))
    assert [t["id"] for t in trial_report.load_trials(str(out)).trials] == ["1", "2"]
    older = out / "artifacts" / "hpt-pipeline-2026-01-01-00-00-00-000000"
    assert [t["id"] for t in trial_report.load_trials(str(older)).trials] == [
        "1", "2", "3", "4", "5"
    ]  # fmt: skip


def test_a_continued_studys_page_names_the_run_each_trial_came_from(tmp_path):
    earlier = _trial("1", S.SUCCEEDED, {"num_units": 64}, [(0.5, 1.0)], seconds=1.0)
    earlier["id"] = f"first-study{ORIGIN_SEP}1"
    ours = _trial("1", S.SUCCEEDED, {"num_units": 128}, [(0.7, 1.0)], seconds=1.0)
    study = trial_report.StudyTrials([earlier, ours], "trials.json", None, None)
    page = trial_report.write_report(study, tmp_path, Metric("val_accuracy")).page.read_text()
    assert "<tr><th>trial</th><th>run</th><th>outcome</th>" in page
    assert "<tr><td>1</td><td>this run</td><td>succeeded</td><td>0.7</td>" in page
    assert "<tr><td>first-study:1</td><td>first-study</td><td>succeeded</td>" in page


def test_a_continued_studys_trials_are_plotted_as_they_ran_with_labels_apart(tmp_path, monkeypatch):
    """Issue 51, case 20: the earlier run's trials first, by number, then this run's; the best
    so far steps through them in that order; no two trial labels overlap."""
    figures: list[Any] = []
    monkeypatch.setattr(trial_plots, "_save", lambda fig, path: figures.append(fig) or path)
    earlier = [
        _trial(str(i), S.SUCCEEDED, {"num_units": 64}, [(0.5 + i / 100, 1.0)], seconds=1.0)
        for i in range(1, 11)
    ]
    for trial in earlier:  # as `continuation` renames an earlier run's trials
        trial["id"] = f"first-study{ORIGIN_SEP}{trial['id']}"
    ours = [_trial(str(i), S.SUCCEEDED, {"num_units": 128}, [(0.7, 1.0)], seconds=1.0)
            for i in range(1, 5)]  # fmt: skip
    trial_plots.plot_metric_per_trial([*earlier, *ours], Metric("val_accuracy", "maximize"),
                                      tmp_path / "m.png")  # fmt: skip
    (ax,) = figures[0].axes
    labels = _tick_labels(ax)
    assert labels == [f"first-study:{i}" for i in range(1, 11)] + ["1", "2", "3", "4"]
    best = next(line for line in ax.get_lines() if "best so far" in line.get_label())
    assert list(best.get_ydata()) == pytest.approx(
        [0.5 + i / 100 for i in range(1, 11)] + [0.7] * 4
    )
    renderer = figures[0].canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
    assert not [(a, b) for a, b in itertools.pairwise(boxes) if a.overlaps(b)]
