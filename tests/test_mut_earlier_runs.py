"""`continue_from` as a user meets it: what is read how often, and the line compile says.

Written against mutmut's survivors in `pipelines/targets/earlier_runs.py` (docs/mutation.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.settings import Settings
from pipelines.study.continuation import ContinuationError, Earlier
from pipelines.targets import earlier_runs
from tests.test_continuation import TODAY, trial
from tests.test_continuation_sources import trials_file

HPT_JOB = "projects/p/locations/us-central1/hyperparameterTuningJobs/42"


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources `continued` reads (a Vertex job answers two trials), in a fresh cache."""
    seen: list[str] = []
    original = earlier_runs.read

    def counted(source: str, *args, **kwargs) -> Earlier:
        seen.append(source)
        if source == HPT_JOB:
            params = {"learning_rate": 0.01, "momentum": 0.8, "num_units": 64}
            return Earlier(source, "42", [trial(1, params, 0.7), trial(2, params, 0.8)], TODAY)
        return original(source, *args, **kwargs)

    monkeypatch.setattr(earlier_runs, "_CACHE", {})
    monkeypatch.setattr(earlier_runs, "read", counted)
    return seen


def test_a_cloud_run_is_read_once_per_process_whatever_asks(reads: list[str]) -> None:
    settings = Settings(continue_from=HPT_JOB)
    first = earlier_runs.continued(settings)
    again = earlier_runs.continued(settings)
    assert reads == [HPT_JOB]
    assert first is not None and again is not None
    assert [t["id"] for t in again.trials] == [t["id"] for t in first.trials]


def test_a_local_source_is_read_again_each_time_since_its_run_may_have_grown(
    reads: list[str], tmp_path: Path
) -> None:
    source = str(trials_file(tmp_path))
    settings = Settings(continue_from=source)
    earlier_runs.continued(settings)
    earlier_runs.continued(settings)
    assert reads == [source, source]


def test_no_continue_from_reads_nothing(reads: list[str]) -> None:
    assert earlier_runs.continued(Settings()) is None
    assert reads == []


def test_compile_says_in_full_what_the_local_study_does_with_the_earlier_trials(
    reads: list[str], tmp_path: Path
) -> None:
    settings = Settings(continue_from=str(trials_file(tmp_path)), max_trials=5)
    found = earlier_runs.continued(settings)
    assert found is not None
    assert earlier_runs.target_line(settings, "local", found) == (
        "continue_from: the local study starts from 2 earlier trial(s) and proposes none of "
        "their configurations again; max_trials=5 counts its own trials"
    )
    assert earlier_runs.target_line(settings, "kubeflow", found) == (
        "continue_from: Katib cannot seed a study: the 2 earlier trial(s) are not re-run; the "
        "new study runs its max_trials=5 as usual and the selection step chooses over both"
    )


@pytest.mark.parametrize("summary", ['{"state": "SUCCEEDED"}', '{"studySpec": {}}'])
def test_a_study_folder_whose_summary_records_no_metrics_is_read_with_none(
    tmp_path: Path, summary: str
) -> None:
    from pipelines.study import trials as tl
    from tests.test_continuation import FOUR

    folder = tmp_path / "out" / "study"
    folder.mkdir(parents=True)
    tl.write_trials(str(folder / "trials.json"), FOUR)
    (folder / "study.json").write_text(summary)  # no studySpec, or one without metrics
    got = earlier_runs.read(str(tmp_path / "out"))
    assert got.objectives == [] and len(got.trials) == 4


def test_a_goal_this_version_does_not_know_is_named_as_recorded_in_the_refusal(
    tmp_path: Path,
) -> None:
    import json

    from pipelines.study import trials as tl
    from pipelines.study.continuation import ContinuationError
    from tests.test_continuation import FOUR

    folder = tmp_path / "out" / "study"
    folder.mkdir(parents=True)
    tl.write_trials(str(folder / "trials.json"), FOUR)
    spec = {"studySpec": {"metrics": [{"metric_id": "val_accuracy", "goal": 7}]}}
    (folder / "study.json").write_text(json.dumps(spec))
    with pytest.raises(ContinuationError) as err:
        earlier_runs.continued(Settings(continue_from=str(tmp_path / "out")))
    assert str(err.value) == (
        f"continue_from={tmp_path / 'out'}: its objectives (val_accuracy 7) differ from today's "
        "(val_accuracy maximize); a study continues only with the same metrics and goals"
    )


@pytest.mark.parametrize("source", ["gs://b/trials.json", "projects/p/jobs/1"])
def test_a_cloud_looking_name_is_refused_even_where_a_folder_of_that_path_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    monkeypatch.chdir(tmp_path)
    Path(source).mkdir(parents=True)  # `gs:/b/trials.json` for the first: Path drops a `/`
    assert Path(source).exists()
    with pytest.raises(ContinuationError) as err:
        earlier_runs.kind_of(source)
    assert str(err.value) == f"continue_from={source}: expected {earlier_runs.EXPECTED}"
