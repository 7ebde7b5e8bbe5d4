"""`--trial-threshold`: a study whose best trial misses it stops before the final training.

The select step runs as the compiled pipeline would call it (its inputs resolved from the
compiled spec, as the backend binds them), on trials that miss or reach the threshold.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from kfp import dsl

from components.select_best_trial import select_best_trial
from components.study_metric import study_metric
from pipelines.compiler import compile_pipeline
from pipelines.settings import Settings
from pipelines.study import trials as tl
from pipelines.study.selection import SelectionError
from tests.vertex_resolve import resolve_inputs

SELECT = "select-best-trial"


def trials_artifact(folder: Path, name: str, values: list[float]) -> SimpleNamespace:
    """A trials artifact of succeeded trials with these final values of metric `name`."""
    trials = [
        tl.make_trial(
            str(i),
            {"num_units": 64},
            state=tl.TrialState.SUCCEEDED,
            final_measurement=tl.measurement(3, {name: value}),
        )
        for i, value in enumerate(values, start=1)
    ]
    path = folder / "trials.json"
    tl.write_trials(str(path), trials)
    return SimpleNamespace(uri=str(path), path=str(path), metadata={})


def select_as_compiled(tmp_path: Path, settings: Settings, trials: SimpleNamespace):
    """Run the select step with the inputs the compiled local pipeline gives it."""
    spec = yaml.safe_load(
        Path(compile_pipeline("local", settings, tmp_path / "p.yaml")).read_text()
    )
    # The study-metric step runs first, as in the pipeline: its goal feeds the selection.
    metrics, goal, _ = study_metric.python_func(**resolve_inputs(spec, outputs={})["study-metric"])
    outputs = {"study-metric": {"study_spec_metrics": metrics, "goal": goal}}
    inputs = resolve_inputs(spec, outputs=outputs)[SELECT]
    summary = dsl.Metrics(name="summary", uri=str(tmp_path / "summary"), metadata={})
    dataset = dsl.Dataset(uri=str(tmp_path / "data"), metadata={"num_classes": 2})
    return select_best_trial.python_func(trials=trials, summary=summary, dataset=dataset, **inputs)


@pytest.mark.parametrize(
    ("metric", "threshold", "values", "relation"),
    [
        ("val_accuracy", 0.9, [0.7, 0.85], ">="),
        ("val_loss", 0.2, [0.5, 0.3], "<="),
    ],
)
def test_a_study_below_the_trial_threshold_stops_before_the_final_training(
    tmp_path, metric, threshold, values, relation
):
    settings = Settings(metric_tag=metric, trial_threshold=threshold)
    with pytest.raises(SelectionError) as err:
        select_as_compiled(tmp_path, settings, trials_artifact(tmp_path, metric, values))
    assert f"missing the threshold ({relation} {threshold}): stopping before the final" in str(
        err.value
    )


def test_a_study_reaching_the_threshold_or_without_one_goes_on_to_the_final_training(tmp_path):
    trials = trials_artifact(tmp_path, "val_loss", [0.5, 0.3])
    for threshold in (0.3, None):
        settings = Settings(metric_tag="val_loss", trial_threshold=threshold)
        best = select_as_compiled(tmp_path, settings, trials)
        assert (best.best_trial_id, best.best_metric) == ("2", 0.3)
