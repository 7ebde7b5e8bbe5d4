"""Which measurement a study keeps per trial: the last one whenever there are several objectives.

The cost metrics are reported once, after the last epoch; Vertex's default selection keeps
the measurement at the best primary value, which lacks them unless it is the last, and
`StudySpec.MeasurementSelectionType` defines "best" for one metric only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from components.study_metric import study_metric
from pipelines.app import cli
from pipelines.compiler import compile_pipeline
from pipelines.settings import Settings, SettingsError, load_settings
from pipelines.study.objectives import ObjectiveError
from pipelines.study.study_spec_check import validate_study_spec
from pipelines.vertex_types import enum_name
from tests.vertex_resolve import resolve_inputs

SEVERAL = ("val_accuracy", "latency_ms")
BEST_WITH_SEVERAL = (
    "measurement_selection=BEST_MEASUREMENT with 2 objectives: the cost metrics are reported "
    "once, after the last epoch, and Vertex's best measurement is best by one metric, so only "
    "the last measurement holds every objective; set LAST_MEASUREMENT or leave it unset"
)


def vertex_study_spec(tmp_path: Path, settings: Settings, **overrides: object) -> Any:
    """The HPT job's study spec as the compiled vertex pipeline sends it (study-metric first)."""
    spec = yaml.safe_load(
        Path(compile_pipeline("vertex", settings, tmp_path / "v.yaml")).read_text()
    )
    first = resolve_inputs(spec, outputs={}, overrides=overrides)["study-metric"]
    metrics, goal, selection = study_metric.python_func(**first)
    produced = {"study_spec_metrics": metrics, "goal": goal, "measurement_selection": selection}
    tune = resolve_inputs(spec, outputs={"study-metric": produced}, overrides=overrides)[
        "tune-on-vertex"
    ]
    return validate_study_spec(
        tune["study_spec_parameters"],
        tune["study_spec_metrics"],
        tune["study_spec_algorithm"],
        tune["study_spec_measurement_selection_type"],
    )


def test_vertex_keeps_the_last_measurement_of_a_study_with_several_objectives(tmp_path):
    study = vertex_study_spec(tmp_path, Settings(objectives=SEVERAL))
    assert [m.metric_id for m in study.metrics] == list(SEVERAL)
    assert enum_name(study, "measurement_selection_type") == "LAST_MEASUREMENT"


def test_one_objective_keeps_vertexs_default_best_measurement(tmp_path):
    study = vertex_study_spec(tmp_path, Settings())
    assert enum_name(study, "measurement_selection_type") == "BEST_MEASUREMENT"


def test_an_explicit_best_measurement_with_several_objectives_is_refused_in_one_line():
    with pytest.raises(SettingsError) as err:
        load_settings(
            overrides={"objectives": SEVERAL, "measurement_selection": "BEST_MEASUREMENT"},
            environ={},
        )
    assert str(err.value) == BEST_WITH_SEVERAL
    # Asked for the last, or left unset: taken.
    assert load_settings(overrides={"objectives": SEVERAL}, environ={}).study.measurement_selection
    assert (
        load_settings(
            overrides={"objectives": SEVERAL, "measurement_selection": "LAST_MEASUREMENT"},
            environ={},
        ).study.measurement_selection
        == "LAST_MEASUREMENT"
    )


def test_the_cli_refuses_it_before_anything_is_compiled(tmp_path):
    config = tmp_path / "vertex.yaml"
    config.write_text(
        "objectives: [val_accuracy, latency_ms]\nmeasurement_selection: BEST_MEASUREMENT\n"
    )
    out = tmp_path / "p.yaml"
    result = CliRunner().invoke(
        cli.app,
        ["compile", "--target", "vertex", "--config", str(config), "--output", str(out)],
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"hpt-pipeline: error: {BEST_WITH_SEVERAL}"]
    assert not out.exists()


def test_run_time_objectives_are_held_to_the_same_rule_before_the_study(tmp_path):
    """`--param objectives=…` on a spec compiled for one objective: the step decides."""
    objectives = list(SEVERAL)
    study = vertex_study_spec(tmp_path, Settings(), objectives=objectives, measurement_selection="")
    assert enum_name(study, "measurement_selection_type") == "LAST_MEASUREMENT"
    with pytest.raises(ObjectiveError) as err:
        study_metric.python_func("val_accuracy", objectives, [], "BEST_MEASUREMENT")
    assert str(err.value) == BEST_WITH_SEVERAL
