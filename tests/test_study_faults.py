"""A study survives its faults: nothing finished is lost, nothing is proposed twice (issue 42).

The race of case 1 is reproduced deterministically: a real SIGTERM is sent to the study
after a trial's job has ended well and before the study records it.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from pipelines.jobs import local_job
from pipelines.study import interruption, trial_runner
from pipelines.study import trials as tl
from pipelines.study.search_space import Parameter, SearchSpace
from pipelines.study.trials import TrialState
from pipelines.targets.local import local_study
from tests.fake_trainer import epoch_value
from tests.test_local_study import study


def read_lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_a_signal_between_a_trials_end_and_its_record_loses_nothing(tmp_path, monkeypatch):
    starts = tmp_path / "starts.txt"
    args = ("--epochs=3", f"--starts={starts}")
    options = dict(max_trial_count=2, parallel_trial_count=1)
    record = local_study._LocalStudy._finish

    def signalled_first(self, outcome, frozen):  # the run is stopped right here, once
        monkeypatch.setattr(local_study._LocalStudy, "_finish", record)
        os.kill(os.getpid(), signal.SIGTERM)
        return record(self, outcome, frozen)

    monkeypatch.setattr(local_study._LocalStudy, "_finish", signalled_first)
    with pytest.raises(interruption.Interrupted):
        study(tmp_path, *args, **options)
    lost = tl.read_trials(str(tmp_path / "study" / tl.TRIALS_FILE))
    assert [tl.trial_state(t) for t in lost] == [TrialState.ACTIVE]  # not recorded: the race

    trials = study(tmp_path, *args, **options)  # resume

    assert read_lines(starts) == ["1", "2"]  # trial 1 was taken as done, not trained again
    assert [tl.trial_state(t) for t in trials] == [TrialState.SUCCEEDED] * 2
    first = trials[0]
    params = tl.trial_parameters(first)
    assert tl.final_metric(first, "val_accuracy") == pytest.approx(epoch_value(params, 3))
    assert first[tl.LOCAL_KEY]["recovered"] is True


def test_a_trial_rerun_past_its_last_epoch_keeps_what_it_reported(tmp_path):
    """Killed after its last epoch, before its record: the rerun resumes past the end."""
    args = ("--epochs=3", "--resume")
    trials = study(tmp_path, *args, max_trial_count=1, parallel_trial_count=1)
    done = trials[0]
    # As if the trainer died after its last checkpoint, before it exited: nothing recorded.
    local_dir = local_job.job_local_dir(str(tmp_path / "study"), "1")
    os.remove(os.path.join(local_dir, trial_runner.OUTCOME_FILE))
    trials_file = tmp_path / "study" / tl.TRIALS_FILE
    active = tl.make_trial("1", tl.trial_parameters(done), state=TrialState.ACTIVE)
    active["startTime"] = done["startTime"]
    tl.write_trials(str(trials_file), [active])

    again = study(tmp_path, *args, max_trial_count=1, parallel_trial_count=1)

    assert tl.trial_state(again[0]) == TrialState.SUCCEEDED
    assert [m["stepCount"] for m in again[0]["measurements"]] == ["1", "2", "3"]
    assert again[0]["finalMeasurement"] == done["finalMeasurement"]


TINY = SearchSpace(parameters=(Parameter("num_units", "integer", min=1, max=3, scale="linear"),))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_study_never_proposes_a_configuration_it_has(tmp_path, seed):
    options = dict(parallel_trial_count=1, study_spec_algorithm="RANDOM_SEARCH", seed=seed)
    first = study(tmp_path, "--epochs=1", space=TINY, max_trial_count=2, **options)
    more = study(tmp_path, "--epochs=1", space=TINY, max_trial_count=5, **options)

    assert more[:2] == first
    units = [tl.trial_parameters(t)["num_units"] for t in more]
    assert sorted(units) == [1, 2, 3]  # the space holds 3 configurations: then the study ends
    study_file = json.loads((tmp_path / "study" / local_study.STUDY_FILE).read_text())
    assert study_file["stopReason"].startswith("no configuration left untried")


# --- case 2/5: the output a study lives in -------------------------------------------------


def _settings(tmp_path: Path, **values):
    from pipelines.settings import LOCAL_RUN_DEFAULTS, Settings

    return Settings(**{**LOCAL_RUN_DEFAULTS, "output": str(tmp_path / "out"), **values})


def _finished_one(tmp_path: Path) -> None:
    tl.write_trials(
        str(tmp_path / "out" / "study" / tl.TRIALS_FILE),
        [tl.make_trial("1", {}, state=TrialState.SUCCEEDED)],
    )


def test_the_default_output_starts_a_fresh_study_when_the_settings_change(tmp_path):
    from pipelines.app import study_identity

    out = tmp_path / "out"
    study_identity.check_and_record(_settings(tmp_path), out)
    first = (out / "study").resolve()  # what a run records: the study's own folder
    _finished_one(tmp_path)

    line = study_identity.check_and_record(
        _settings(tmp_path, epochs=6, max_trials=8), out, fresh_when_different=True
    )

    assert line == (
        f"note: {out} held a study of other settings (epochs: 10 → 6); "
        f"kept as {first}, starting a fresh study"
    )
    assert (first / tl.TRIALS_FILE).exists()  # the old study, kept where it was recorded
    assert json.loads((first / study_identity.IDENTITY_FILE).read_text())["epochs"] == 10
    assert not (out / "study" / tl.TRIALS_FILE).exists()
    recorded = json.loads((out / "study" / study_identity.IDENTITY_FILE).read_text())
    assert recorded["epochs"] == 6


def test_a_study_made_before_studies_had_their_own_folders_is_kept_beside_as_before(tmp_path):
    from pipelines.app import study_identity

    out = tmp_path / "out"
    (out / "study").mkdir(parents=True)  # an output of an earlier release: a plain folder
    recorded = study_identity.identity(_settings(tmp_path))
    study_identity._write_identity(out / "study", json.loads(json.dumps(recorded, default=str)))
    _finished_one(tmp_path)

    line = study_identity.check_and_record(
        _settings(tmp_path, epochs=6), out, fresh_when_different=True
    )

    kept = [p for p in out.iterdir() if p.name.startswith("study-")]
    assert len(kept) == 1 and (kept[0] / tl.TRIALS_FILE).exists()
    assert line is not None and f"kept as {kept[0]}," in line


def test_an_output_named_by_the_user_keeps_its_study_and_refuses_other_settings(tmp_path):
    from pipelines.app import study_identity
    from pipelines.settings import SettingsError

    study_identity.check_and_record(_settings(tmp_path), tmp_path / "out")
    _finished_one(tmp_path)
    with pytest.raises(SettingsError, match="epochs: 10 → 6"):
        study_identity.check_and_record(_settings(tmp_path, epochs=6), tmp_path / "out")
    assert (tmp_path / "out" / "study" / tl.TRIALS_FILE).exists()


def test_a_study_that_finished_no_trial_is_no_study_of_other_settings(tmp_path):
    """A run refused by its weights leaves the output reusable once the flag is fixed."""
    from pipelines.app import study_identity

    out = tmp_path / "out"
    study_identity.check_and_record(_settings(tmp_path, epochs=3), out)
    tl.write_trials(  # its only trial was interrupted
        str(out / "study" / tl.TRIALS_FILE), [tl.make_trial("1", {}, state=TrialState.ACTIVE)]
    )

    line = study_identity.check_and_record(_settings(tmp_path), out)

    assert line is not None and "starting a fresh study" in line
    assert not (out / "study" / tl.TRIALS_FILE).exists()


# --- case 2/3: one failure taxonomy; an error common to every trial stops the study -------


def test_a_trial_the_trainer_refuses_at_set_up_stops_the_study_at_once(tmp_path):
    """Bad weights or data: every trial would fail alike, so the budget is not spent on them."""
    starts = tmp_path / "starts.txt"
    said = "trainer:_error:_--weights=/nonexistent.h5:_no_such_file"
    args = (
        "--epochs=2",
        "--fail_at=0",
        "--fail_code=2",
        f"--fail_say={said}",
        f"--starts={starts}",
    )
    with pytest.raises(local_study.StudyError) as stopped:
        study(tmp_path, *args, max_trial_count=4, parallel_trial_count=1, max_failed_trial_count=4)
    message = str(stopped.value)
    assert "\n" not in message
    assert message.startswith(
        "study stopped: trial 1 failed: trainer: error: --weights=/nonexistent.h5: no such file"
    )
    assert "(log: " in message and message.endswith("chief-0.log)")
    assert read_lines(starts) == ["1"]


def test_a_full_disk_interrupts_the_trial_stops_the_study_and_the_resume_reruns_it(tmp_path):
    full = ("--epochs=1", "--fail_at=1", "--fail_say=OSError:_[Errno_28]_No_space_left_on_device")
    with pytest.raises(local_study.StudyError, match="out of disk space: OSError: .Errno 28. No"):
        study(tmp_path, *full, max_trial_count=2, parallel_trial_count=1, max_failed_trial_count=4)
    stopped = tl.read_trials(str(tmp_path / "study" / tl.TRIALS_FILE))
    assert [tl.trial_outcome(t) for t in stopped] == [tl.INTERRUPTED]  # ours, not a failure

    trials = study(tmp_path, "--epochs=1", max_trial_count=2, parallel_trial_count=1)

    assert [tl.trial_outcome(t) for t in trials] == [tl.SUCCEEDED, tl.SUCCEEDED]
    assert tl.trial_parameters(trials[0]) == tl.trial_parameters(stopped[0])


def test_a_trial_the_study_stopped_is_interrupted_in_every_count_and_line(tmp_path):
    from pipelines.app import study_identity
    from pipelines.study import progress_lines

    args = ("--epochs=20", "--sleep=0.2", "--fail_at=1", "--fail_trials=1")
    with pytest.raises(local_study.StudyError, match="the first trial failed"):
        study(tmp_path, *args, max_trial_count=2, parallel_trial_count=2)
    trials = tl.read_trials(str(tmp_path / "study" / tl.TRIALS_FILE))
    assert [tl.trial_outcome(t) for t in trials] == [tl.FAILED, tl.INTERRUPTED]
    counts = progress_lines.counts(trials)
    assert (counts["failed"], counts["interrupted"], counts["succeeded"]) == (1, 1, 0)
    assert progress_lines.trial_line(trials[1]).startswith(
        "trial 2 interrupted (the study stopped it): rerun on resume"
    )
    assert study_identity.trial_counts(tmp_path / "study") == {"done": 0, "failed": 1, "rerun": 1}
    from pipelines.study import trials_artifact  # what the run's summary table counts

    assert trials_artifact.summary(trials)["outcomes"] == {"failed": 1, "interrupted": 1}


# --- case 2: bad --weights are found before the data is prepared ---------------------------


def test_a_missing_weights_file_is_refused_before_anything_runs(tmp_path):
    from pipelines.settings import SettingsError
    from pipelines.targets.local.cli import preflight as local_preflight

    bad = _settings(tmp_path, model="mobilenet_v3_small", weights=str(tmp_path / "no.h5"))
    with pytest.raises(SettingsError, match=r"^--weights=.*no\.h5: no such file \(expected a"):
        local_preflight.check_weights_load(bad)


def test_a_corrupt_weights_file_is_refused_with_the_trainers_reason(tmp_path):
    from pipelines.settings import SettingsError
    from pipelines.targets.local.cli import preflight as local_preflight

    corrupt = tmp_path / "corrupt.weights.h5"
    corrupt.write_bytes(b"not an HDF5 file")
    bad = _settings(tmp_path, model="mobilenet_v3_small", weights=str(corrupt))
    with pytest.raises(SettingsError) as refused:
        local_preflight.check_weights_load(bad)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"--weights={corrupt}: cannot load it into the backbone (")


def test_weights_that_load_pass_the_preflight(tmp_path):
    from pipelines.targets.local.cli import preflight as local_preflight

    local_preflight.check_weights_load(
        _settings(tmp_path, model="mobilenet_v3_small", weights="none")
    )
    local_preflight.check_weights_load(_settings(tmp_path))  # cnn: no backbone, nothing to load


# --- case 4: a step's failure under `run` is its own one line ------------------------------

STEP_OUTPUT = """\
Executing task 'prepare-dataset'
Streamed logs:
    prepared 27/39 images
    Traceback (most recent call last):
    File "/x/dataprep/prepare.py", line 187, in add
    raise PreparationError(
    dataprep.sources.PreparationError: --source=x: 1 of 39 images are unreadable; first: a.png
    Traceback (most recent call last):
    File "/x/pipelines/jobs/step_process.py", line 53, in run_module
    pipelines.jobs.step_process.StepProcessError: python -m dataprep.prepare exited with 1
Task 'prepare-dataset' finished with status FAILURE
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_a_steps_traceback_stays_in_the_log_and_its_own_reason_is_said(tmp_path, verbose):
    from pipelines.targets.local.cli import run as local_run

    log, shown = tmp_path / "pipeline.log", []
    with open(log, "w", encoding="utf-8") as f:
        local_run.ProgressFilter(f, shown.append, tracebacks=verbose).write(STEP_OUTPUT)
    assert "Traceback" in log.read_text()
    assert any("Traceback" in line for line in shown) == verbose
    assert shown[:2] == ["▶ prepare-dataset", "    prepared 27/39 images"]
    assert shown[-1] == "✗ prepare-dataset failure"
    assert local_run.failure_reason(log) == (
        "PreparationError: --source=x: 1 of 39 images are unreadable; first: a.png"
    )


def test_the_option_the_data_steps_message_names_exists_on_run_and_as_a_setting(tmp_path):
    from typer.testing import CliRunner

    from pipelines.app.cli import app
    from pipelines.settings import SettingsError

    assert "--max-bad-fraction" in CliRunner().invoke(app, ["run", "--help"]).stdout
    assert _settings(tmp_path, max_bad_fraction=0.2).data.max_bad_fraction == 0.2
    with pytest.raises(SettingsError, match="max_bad_fraction=1.5"):
        _settings(tmp_path, max_bad_fraction=1.5)


# --- case 4: nested folders and tiny classes are counted and said ---------------------------


def test_nested_folders_and_a_class_too_small_for_every_split_are_said(tmp_path):
    from dataprep.prepare import prepare_dataset, skipped_lines
    from tests.test_prepare import make_folder

    source = make_folder(tmp_path / "src", {"cats": 12, "dogs": 12, "owl": 1})
    make_folder(tmp_path / "src" / "cats" / "more", {"deep": 3})  # cats/more/deep/*.png
    metadata = prepare_dataset(str(source), str(tmp_path / "out"), image_size=24, seed=0)

    assert metadata["nested"] == {"cats/more": 3}
    assert metadata["thin_classes"] == {"owl": ["validation", "test"]}
    lines = skipped_lines(metadata)
    assert (
        "not read: 3 image(s) in 1 folder(s) nested in class folders (a class folder holds "
        "its images directly): cats/more (3)"
    ) in lines
    assert lines[-1].startswith("warning: class 'owl' has no validation and no test image")


def test_a_gs_source_that_cannot_be_read_says_credentials_in_one_line(tmp_path):
    from dataprep.sources import PreparationError, folder_source

    with pytest.raises(PreparationError) as refused:  # no credentials, no network here
        folder_source("gs://hpt-no-such-bucket-42/images")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("--source=gs://hpt-no-such-bucket-42/images: no such folder, or")
    assert "gcloud auth application-default login" in message


def test_the_resume_line_counts_a_trial_found_finished_as_done(tmp_path, monkeypatch):
    from pipelines.app import study_identity

    record = local_study._LocalStudy._finish

    def signalled_first(self, outcome, frozen):
        monkeypatch.setattr(local_study._LocalStudy, "_finish", record)
        os.kill(os.getpid(), signal.SIGTERM)
        return record(self, outcome, frozen)

    monkeypatch.setattr(local_study._LocalStudy, "_finish", signalled_first)
    with pytest.raises(interruption.Interrupted):
        study(tmp_path, "--epochs=1", max_trial_count=2, parallel_trial_count=1)
    line = study_identity.resume_line(tmp_path / "study")
    assert line == f"resuming the study in {tmp_path / 'study'}: 1 trial(s) done, reused"


# --- case 3: disk space for the dataset, trials and export is checked before any work -------


def test_a_run_that_cannot_fit_on_its_disk_is_refused_before_any_work(tmp_path):
    from pipelines.settings import SettingsError
    from pipelines.targets.local.cli import preflight as local_preflight

    folder = tmp_path / "images"
    for name in ("a", "b"):
        (folder / name).mkdir(parents=True)
        for i in range(5):
            (folder / name / f"{i}.png").write_bytes(b"x")
    settings = _settings(
        tmp_path, source=str(folder), image_size=100, max_trials=4, record_format="raw"
    )
    need = local_preflight.planned_disk_bytes(settings)
    params = (100 // 8) ** 2 * local_preflight.DENSE_FEATURES * local_preflight.MAX_UNITS
    assert need == 10 * 100 * 100 * 3 + 5 * params * 4 * 7  # dataset + (4 trials + final)
    # Encoded records (auto's choice at 100 px) are counted at a quarter of raw pixels.
    encoded = local_preflight.planned_disk_bytes(settings.replace(record_format="auto"))
    assert encoded == 10 * 100 * 100 * 3 // 4 + 5 * params * 4 * 7

    with pytest.raises(SettingsError) as refused:
        local_preflight.check_disk(settings, free=need - 1)
    message = str(refused.value)
    assert message.startswith(f"output={settings.local.output}: the run would write ~")
    assert "MiB is free there; expected more free space" in message
    local_preflight.check_disk(settings, free=need)


def test_imagenet_weights_are_probed_not_taken_for_a_missing_file(tmp_path, monkeypatch):
    """resnet50's default `imagenet` goes to the probe (cached or downloadable), never 'no file'."""
    import subprocess

    from pipelines.settings import SettingsError
    from pipelines.targets.local.cli import preflight as local_preflight

    probed = []

    def probe(argv, **_):
        probed.append(argv[3:])
        said = "trainer: error: --weights=imagenet: cannot download the ImageNet weights (x)"
        return subprocess.CompletedProcess(argv, 2, "", f"noise\n{said}\n")

    monkeypatch.setattr(local_preflight.subprocess, "run", probe)
    cached = tmp_path / "keras" / "models" / "other_notop.h5"  # a cache: the probe decides
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"x")
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    with pytest.raises(SettingsError) as refused:
        local_preflight.check_weights_load(_settings(tmp_path, model="resnet50"))
    assert probed == [["resnet50", "imagenet", "32"]]
    assert str(refused.value) == "--weights=imagenet: cannot download the ImageNet weights (x)"


def test_a_small_disk_is_said_in_mib_not_as_zero_gib(tmp_path):
    """A 6 MB tmpfs (case 3) read '~0.0 GiB … and 0.0 GiB is free'."""
    from pipelines.settings import SettingsError
    from pipelines.targets.local.cli import preflight as local_preflight

    settings = _settings(tmp_path, source="sample", image_size=24)
    need = local_preflight.planned_disk_bytes(settings, local_preflight.SAMPLE_IMAGES)
    assert 20 << 20 < need < 30 << 20
    with pytest.raises(SettingsError) as refused:
        local_preflight.check_disk(settings, free=6 << 20)
    message = str(refused.value)
    assert f"would write ~{need / (1 << 20):.1f} MiB (dataset at 24 px" in message
    assert "and 6.0 MiB is free there" in message
    assert local_preflight.size_text(3 << 30) == "3.0 GiB"


def test_imagenet_offline_with_an_empty_keras_cache_is_said_without_tensorflow(
    tmp_path, monkeypatch
):
    """No cached weights at all and no network: refused in seconds, no 30-60 s probe."""
    from pipelines.settings import SettingsError
    from pipelines.targets.local.cli import preflight as local_preflight

    def probe(*_, **__):
        raise AssertionError("the TensorFlow probe ran")

    monkeypatch.setattr(local_preflight.subprocess, "run", probe)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setattr(local_preflight, "KERAS_FALLBACK_HOME", str(tmp_path / "tmp-keras"))
    monkeypatch.setattr(local_preflight, "TFDS_HOST", ("host.invalid", 443))  # never resolves
    with pytest.raises(SettingsError) as refused:
        local_preflight.check_weights_load(_settings(tmp_path, model="resnet50"))
    message = str(refused.value)
    assert message.startswith(
        f"--weights=imagenet: not in Keras's cache ({tmp_path}/keras/models holds no weights) "
        "and host.invalid (where Keras downloads them) is unreachable ("
    )
    assert message.endswith("pass --weights PATH to a Keras weights file (local or gs://)")

    cached = tmp_path / "keras" / "models" / "some_notop.h5"  # maybe the right one: probe it
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"x")
    with pytest.raises(AssertionError, match="the TensorFlow probe ran"):
        local_preflight.check_weights_load(_settings(tmp_path, model="resnet50"))


def test_a_rerun_trial_starts_without_its_earlier_attempts_outcome(tmp_path):
    """An outcome left by an earlier attempt is gone before the rerun's job starts."""
    base = str(tmp_path / "study")
    local_dir = local_job.job_local_dir(base, "1")
    os.makedirs(local_dir)
    for stale in (trial_runner.OUTCOME_FILE, trial_runner.OUTCOME_FILE + ".tmp"):
        Path(local_dir, stale).write_text("{}")
    Path(local_dir, "chief-0.log").write_text("kept")

    assert trial_runner._fresh_trial_dir(base, "1") == local_dir

    assert sorted(os.listdir(local_dir)) == ["chief-0.log"]
    assert trial_runner.load_outcome(local_dir) is None
