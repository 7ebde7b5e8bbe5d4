"""The trial's cost: model size from the variables, median latency, a builder's own metrics,
and the rule that carries a once-measured metric into the trial's final measurement."""

from __future__ import annotations

import itertools

import pytest

from pipelines.study import trials as trials_lib
from pipelines.study.measurements import Measurement, select_measurement, with_measured_once
from pipelines.study.search_space import Metric
from trainer.contract import COST_METRICS, METRIC_GOALS, ContractError


def test_cost_metrics_are_minimized_in_the_one_table():
    assert {k: METRIC_GOALS[k] for k in COST_METRICS} == {
        "model_size_mb": "minimize",
        "latency_ms": "minimize",
    }


class _Var:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


def test_model_size_counts_every_variable_by_its_dtype():
    from trainer import cost_metrics

    variables = [_Var((1000, 250), "float32"), _Var((500,), "float16"), _Var((), "int64")]
    assert cost_metrics.model_size_mb(variables) == pytest.approx((1_000_000 + 1000 + 8) / 1e6)


class _Result:
    def numpy(self):
        return 0


def test_latency_is_the_median_of_the_timed_calls_after_warm_up():
    from trainer import cost_metrics

    calls = []

    def serve(image):
        calls.append(image)
        return {"class_id": _Result()}

    # Each timed call reads the clock twice; durations 5, 1, 100 ms: the median is 5.
    ticks = iter([0.0, 0.005, 1.0, 1.001, 2.0, 2.1])
    latency = cost_metrics.latency_ms(serve, "img", warmup=2, timed=3, clock=lambda: next(ticks))
    assert latency == pytest.approx(5.0)
    assert len(calls) == 5  # 2 warm-up + 3 timed


def test_a_real_serving_function_is_measured_on_one_image_of_the_study_size():
    import tensorflow as tf

    from trainer import cost_metrics
    from trainer.export import ServingModule
    from trainer.models.cnn import build

    model = build((24, 24, 3), 2, num_units=4)
    module = ServingModule(model, (24, 24, 3), ("a", "b"))
    image = cost_metrics.probe_image((24, 24, 3))
    assert image.shape == (1,) and image.dtype == tf.string
    costs = cost_metrics.measure(module.serve, module.model_variables, (24, 24, 3))
    assert list(costs) == list(COST_METRICS)
    params = sum(int(tf.size(w)) for w in model.weights)
    assert costs["model_size_mb"] == pytest.approx(params * 4 / 1e6)
    assert 0 < costs["latency_ms"] < 5000


def test_a_builder_reports_its_own_metric_through_hpt_metrics():
    from trainer import cost_metrics

    def build(image_shape, num_classes):
        raise AssertionError("not called")

    assert cost_metrics.builder_metrics(build, model=None) == {}
    build.hpt_metrics = lambda model: {"flops_m": 12}  # type: ignore[attr-defined]
    assert cost_metrics.builder_metrics(build, model="m") == {"flops_m": 12.0}
    for bad, message in (
        ({"val_accuracy": 1.0}, "tag val_accuracy is the trainer's own"),
        ({"flops": float("nan")}, "flops=nan, expected a finite number"),
        ({"2x": 1.0}, "tag '2x', expected a letter"),
        ([1.0], "returned list, expected"),
    ):
        build.hpt_metrics = lambda model, bad=bad: bad  # type: ignore[attr-defined]
        with pytest.raises(ContractError, match=message):
            cost_metrics.builder_metrics(build, model=None)


def _measurements():
    return [
        Measurement(1, {"val_accuracy": 0.6}, 1.0),
        Measurement(2, {"val_accuracy": 0.9}, 2.0),
        Measurement(3, {"val_accuracy": 0.7, "latency_ms": 4.0, "model_size_mb": 0.5}, 3.0),
    ]


def test_the_best_measurement_carries_the_cost_reported_with_the_last_step():
    measurements = _measurements()
    best = select_measurement(measurements, [Metric("val_accuracy")], "BEST_MEASUREMENT")
    assert best is not None and best.step == 2 and "latency_ms" not in best.metrics
    final = with_measured_once(best, measurements)
    assert final is not None
    assert final.step == 2
    assert final.metrics == {"val_accuracy": 0.9, "latency_ms": 4.0, "model_size_mb": 0.5}
    assert with_measured_once(None, measurements) is None


def test_a_vertex_trial_gets_the_same_rule():
    steps = [m for m in _measurements()]
    trial = trials_lib.make_trial(
        "1",
        {"learning_rate": 0.1},
        state=trials_lib.TrialState.SUCCEEDED,
        final_measurement=trials_lib.measurement(2, {"val_accuracy": 0.9}),
        measurements=[trials_lib.measurement(m.step, m.metrics) for m in steps],
    )
    carried = trials_lib.with_measured_once(trial)
    assert trials_lib.final_metric(carried, "latency_ms") == 4.0
    assert trials_lib.final_metric(carried, "val_accuracy") == 0.9
    assert trials_lib.final_metric(trial, "latency_ms") is None  # the input is left alone
    trials_lib.validate_trial(carried)  # still a Vertex Trial


def test_a_metric_reported_every_step_is_not_measured_once():
    steps = [dict(m.metrics) for m in _measurements()]
    assert trials_lib.measured_once(steps) == {"latency_ms": 4.0, "model_size_mb": 0.5}
    assert trials_lib.measured_once(list(itertools.repeat({"a": 1.0}, 2))) == {}


TEAM_BUILDER = """
import keras


def build(image_shape, num_classes, *, width: int = 8):
    inputs = keras.Input(shape=tuple(image_shape))
    x = keras.layers.Flatten()(keras.layers.Conv2D(width, 3)(inputs))
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))


build.hpt_metrics = lambda model: {"params_k": model.count_params() / 1000}
"""


@pytest.mark.slow
def test_a_trial_reports_its_cost_and_a_team_builders_metric_with_its_last_step(
    synthetic_data, tmp_path
):
    import json

    from tests.conftest import ROOT, run_trainer

    (tmp_path / "teamcost.py").write_text(TEAM_BUILDER)
    metrics_file = tmp_path / "hypertune" / "output.metrics"
    result = run_trainer(
        [f"--data={synthetic_data}", "--model=teamcost:build", "--epochs=2", "--batch_size=16"],
        CLOUD_ML_HP_METRIC_FILE=str(metrics_file),
        CLOUD_ML_TRIAL_ID="9",
        PYTHONPATH=f"{tmp_path}:{ROOT}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    tags = {
        k: r["global_step"]
        for r in reports
        for k in r
        if k not in ("timestamp", "trial", "global_step", "checkpoint_path")
    }
    # No --model_dir: nothing is exported, the cost is measured all the same.
    expected = {"val_accuracy": "2", "val_loss": "2", "model_size_mb": "2", "latency_ms": "2"}
    assert tags == {**expected, "params_k": "2"}  # every validation metric, each epoch
    (params_k,) = [float(r["params_k"]) for r in reports if "params_k" in r]
    (size,) = [float(r["model_size_mb"]) for r in reports if "model_size_mb" in r]
    assert size == pytest.approx(params_k * 1000 * 4 / 1e6)  # float32 variables
