"""The trials artifact follows Vertex's Trial JSON; readers take what Trial.to_json gives."""

from __future__ import annotations

import json

import pytest

from pipelines.study import trials as tl
from pipelines.study.trials import TrialState


def sample_trial(**changes):
    trial = tl.make_trial(
        "3",
        {"learning_rate": 0.01, "num_units": 128, "optimizer": "sgd"},
        state=TrialState.SUCCEEDED,
        final_measurement=tl.measurement(2, {"val_accuracy": 0.9}),
        measurements=[
            tl.measurement(1, {"val_accuracy": 0.5}, elapsed_seconds=1.25),
            tl.measurement(2, {"val_accuracy": 0.9}, elapsed_seconds=2.5),
        ],
        start_time=tl.timestamp(1_700_000_000),
        end_time=tl.timestamp(1_700_000_010.5),
        local={"logPath": "/x/3/local/chief-0.log", "exitCode": 0},
    )
    trial.update(changes)
    return trial


def test_state_enum_mirrors_aiplatform_v1():
    from google.cloud.aiplatform_v1.types import Trial

    assert {s.name: s.value for s in TrialState} == {s.name: s.value for s in Trial.State}
    assert TrialState.SUCCEEDED == 4


def test_trial_parses_strictly_into_aiplatform_v1_trial():
    from google.cloud.aiplatform_v1.types import Trial

    trial = sample_trial()
    parsed = tl.validate_trial(trial)
    assert parsed.id == "3" and parsed.state == Trial.State.SUCCEEDED
    assert parsed.final_measurement.step_count == 2
    assert parsed.final_measurement.metrics[0].metric_id == "val_accuracy"
    assert [m.step_count for m in parsed.measurements] == [1, 2]
    assert parsed.measurements[0].elapsed_duration.total_seconds() == 1.25
    assert parsed.end_time.timestamp() == 1_700_000_010.5
    # What Vertex's own serializer writes back is what we wrote (local extras aside).
    back = json.loads(Trial.to_json(parsed, always_print_fields_with_no_presence=False))
    expected = {k: v for k, v in trial.items() if k != tl.LOCAL_KEY}
    assert back["parameters"] == expected["parameters"]
    assert back["finalMeasurement"] == expected["finalMeasurement"]
    assert back["state"] == expected["state"]


def test_unknown_field_outside_local_is_refused():
    with pytest.raises(tl.TrialsError, match='no field named "bogus"'):
        tl.validate_trial(sample_trial(bogus=1))


def test_read_takes_ints_names_and_the_list_trials_shape(tmp_path):
    from google.cloud.aiplatform_v1.types import Trial

    path = tmp_path / "trials.json"
    tl.write_trials(str(path), [sample_trial()])
    (trial,) = tl.read_trials(str(path))
    assert trial == sample_trial()
    # A Vertex-side fetcher writes Trial.to_json output, enums as names or ints.
    proto = tl.validate_trial(sample_trial())
    by_name = json.loads(Trial.to_json(proto, use_integers_for_enums=False))
    assert by_name["state"] == "SUCCEEDED"
    path.write_text(json.dumps({"trials": [by_name, json.loads(Trial.to_json(proto))]}))
    read = tl.read_trials(str(path))
    assert [tl.trial_state(t) for t in read] == [TrialState.SUCCEEDED] * 2
    assert all(t["state"] == 4 for t in read)
    assert tl.final_metric(read[0], "val_accuracy") == 0.9
    assert tl.trial_parameters(read[0]) == {
        "learning_rate": 0.01,
        "num_units": 128,
        "optimizer": "sgd",
    }


def test_failed_trial_is_infeasible_with_a_reason():
    trial = tl.make_trial(
        "1",
        {"learning_rate": 0.5},
        state=TrialState.INFEASIBLE,
        infeasible_reason="replica chief-0 exited with code 3",
        local={"logTail": "Traceback ...", "exitCode": 3},
    )
    parsed = tl.validate_trial(trial)
    assert parsed.state.name == "INFEASIBLE"
    assert parsed.infeasible_reason.startswith("replica chief-0")
    assert tl.final_metric(trial, "val_accuracy") is None


def test_bad_files_and_states(tmp_path):
    with pytest.raises(tl.TrialsError, match="unknown state 'DONE'"):
        tl.trial_state({"id": "1", "state": "DONE"})
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(tl.TrialsError, match="not JSON"):
        tl.read_trials(str(bad))
    with pytest.raises(tl.TrialsError, match="cannot read trials"):
        tl.read_trials(str(tmp_path / "missing.json"))


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "out" / "trials.json"
    tl.write_trials(str(path), [sample_trial(), sample_trial(id="4")])
    assert [p.name for p in path.parent.iterdir()] == ["trials.json"]
    assert [t["id"] for t in tl.read_trials(str(path))] == ["3", "4"]
