"""A run owns its output (one lock, one study) and what would fail late is refused first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipelines import ownership
from pipelines.app import study_identity
from pipelines.settings import (
    LOCAL_RUN_DEFAULTS,
    STUDY_SETTINGS,
    Settings,
    SettingsError,
    load_settings,
)
from pipelines.study import trials as tl
from pipelines.study.trials import TrialState
from pipelines.targets.local.cli import preflight as local_preflight
from tests.conftest import ROOT

HOLD = textwrap.dedent(
    """
    import sys, time
    from pipelines import ownership
    with ownership.owned(sys.argv[1], "--output=x"):
        print("held", flush=True)
        time.sleep(600)
    """
)


def hold(lock: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_busy_output_is_refused_naming_the_holder_and_freed_when_it_dies(tmp_path, sig):
    lock = tmp_path / "out" / "run.lock"
    holder = hold(lock)
    try:
        with pytest.raises(ownership.BusyError) as refused:
            ownership.owned(str(lock), "--output=x").__enter__()
        message = str(refused.value)
        assert f"pid {holder.pid}, started " in message and "\n" not in message
    finally:
        os.kill(holder.pid, sig)  # however it dies, the kernel lets go
        holder.wait()
    with ownership.owned(str(lock), "--output=x"):
        assert f'"pid": {os.getpid()}' in lock.read_text()


def test_the_lock_is_not_inherited_by_children(tmp_path):
    lock = tmp_path / "run.lock"
    with ownership.owned(str(lock), "--output=x"):
        child = subprocess.Popen(["sleep", "30"])
    try:
        with ownership.owned(str(lock), "--output=x"):  # the child does not hold it
            pass
    finally:
        child.kill()
        child.wait()


def settings(tmp_path: Path, **values) -> Settings:
    return Settings(**{**LOCAL_RUN_DEFAULTS, "output": str(tmp_path / "out"), **values})


def one_trial_done(tmp_path: Path) -> None:
    """A study that finished a trial (one that finished none is set aside, not refused)."""
    study = tmp_path / "out" / "study"
    tl.write_trials(
        str(study / tl.TRIALS_FILE), [tl.make_trial("1", {}, state=TrialState.SUCCEEDED)]
    )


def test_a_rerun_with_other_defining_settings_is_refused_listing_each(tmp_path):
    first = settings(tmp_path)
    assert study_identity.check_and_record(first, tmp_path / "out") is None
    one_trial_done(tmp_path)
    folder = tmp_path / "images" / "a"
    folder.mkdir(parents=True)
    (folder / "1.png").write_bytes(b"x")
    with pytest.raises(SettingsError) as refused:
        study_identity.check_and_record(
            settings(tmp_path, source=str(tmp_path / "images"), epochs=3), tmp_path / "out"
        )
    message = str(refused.value)
    assert "\n" not in message and "epochs: 10 → 3" in message
    assert "source: 'sample' → " in message and "dataset: 'sample' → '1 files, sha256" in message


def test_settings_that_may_change_on_resume_are_allowed_and_the_resume_is_described(tmp_path):
    study_identity.check_and_record(settings(tmp_path), tmp_path / "out")
    study = tmp_path / "out" / "study"
    tl.write_trials(
        str(study / tl.TRIALS_FILE),
        [
            tl.make_trial("1", {}, state=TrialState.SUCCEEDED),
            tl.make_trial("2", {}, state=TrialState.ACTIVE),
        ],
    )
    line = study_identity.check_and_record(
        settings(tmp_path, max_trials=8, parallel_trials=1, max_failed_trials=5, workers=2),
        tmp_path / "out",
    )
    assert line == (
        f"resuming the study in {study}: 1 trial(s) done, reused; 1 interrupted, to rerun"
    )


def test_an_image_folder_changed_in_place_is_another_study(tmp_path):
    folder = tmp_path / "images" / "cats"
    folder.mkdir(parents=True)
    (folder / "1.png").write_bytes(b"x")
    source = str(tmp_path / "images")
    study_identity.check_and_record(settings(tmp_path, source=source), tmp_path / "out")
    one_trial_done(tmp_path)
    (folder / "2.png").write_bytes(b"y")
    with pytest.raises(SettingsError, match=r"dataset: '1 files, sha256 \w+' → '2 files"):
        study_identity.check_and_record(settings(tmp_path, source=source), tmp_path / "out")


def test_an_image_rewritten_in_place_at_the_same_size_is_another_study(tmp_path):
    folder = tmp_path / "images" / "cats"
    folder.mkdir(parents=True)
    image = folder / "1.png"
    image.write_bytes(b"x")
    os.utime(image, ns=(1_000_000_000, 1_000_000_000))
    source = str(tmp_path / "images")
    study_identity.check_and_record(settings(tmp_path, source=source), tmp_path / "out")
    one_trial_done(tmp_path)
    image.write_bytes(b"y")  # same name, same size, new content (and a new mtime)
    os.utime(image, ns=(2_000_000_000, 2_000_000_000))
    with pytest.raises(SettingsError, match=r"dataset: '1 files, sha256 \w+' → '1 files, sha"):
        study_identity.check_and_record(settings(tmp_path, source=source), tmp_path / "out")


def test_another_model_over_the_same_search_space_is_another_study(tmp_path):
    first = settings(tmp_path, model="resnet50", image_size=32, search_space="optimizer")
    study_identity.check_and_record(first, tmp_path / "out")
    one_trial_done(tmp_path)
    other = settings(tmp_path, model="mobilenet_v3_small", image_size=32, search_space="optimizer")
    with pytest.raises(SettingsError) as refused:
        study_identity.check_and_record(other, tmp_path / "out")
    assert "model: 'resnet50' → 'mobilenet_v3_small'" in str(refused.value)


def test_an_image_moved_to_another_class_is_another_study(tmp_path):
    """Same file, same size, same time: only its path (its label) changed."""
    for name in ("cats", "dogs"):
        (tmp_path / "images" / name).mkdir(parents=True)
    image = tmp_path / "images" / "cats" / "1.png"
    image.write_bytes(b"x")
    os.utime(image, ns=(1_000_000_000, 1_000_000_000))
    source = str(tmp_path / "images")
    study_identity.check_and_record(settings(tmp_path, source=source), tmp_path / "out")
    one_trial_done(tmp_path)
    os.rename(image, tmp_path / "images" / "dogs" / "1.png")
    with pytest.raises(SettingsError, match=r"dataset: '1 files, sha256 \w+' → '1 files, sha"):
        study_identity.check_and_record(settings(tmp_path, source=source), tmp_path / "out")


def test_a_search_space_file_edited_in_place_is_another_study(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("parameters:\n  - {id: learning_rate, type: double, min: 0.001, max: 0.1}\n")
    study_identity.check_and_record(settings(tmp_path, search_space=str(space)), tmp_path / "out")
    one_trial_done(tmp_path)
    space.write_text("parameters:\n  - {id: learning_rate, type: double, min: 0.001, max: 0.2}\n")
    with pytest.raises(SettingsError, match="search_space_content: '"):
        study_identity.check_and_record(
            settings(tmp_path, search_space=str(space)), tmp_path / "out"
        )


def test_the_refusal_lists_every_difference_and_the_two_ways_out(tmp_path):
    study_identity.check_and_record(settings(tmp_path), tmp_path / "out")
    one_trial_done(tmp_path)
    with pytest.raises(SettingsError) as refused:
        study_identity.check_and_record(settings(tmp_path, epochs=3, seed=7), tmp_path / "out")
    assert str(refused.value) == (
        f"--output={tmp_path / 'out'} holds a study of other settings (epochs: 10 → 3; "
        f"seed: {LOCAL_RUN_DEFAULTS.get('seed', Settings.default('seed'))!r} → 7); rerun with the "
        "same "
        "settings to resume it, or pass a new --output"
    )


def test_named_datasets_are_recorded_by_name_and_folders_by_absolute_path(tmp_path, monkeypatch):
    for source in ("tfds:beans", "gs://bucket/images"):
        recorded = study_identity.identity(settings(tmp_path, source=source))
        assert (recorded["source"], recorded["dataset"]) == (source, source)
    (tmp_path / "images" / "cats").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    recorded = study_identity.identity(settings(tmp_path, source="images"))
    assert recorded["source"] == str(tmp_path / "images")


def test_a_setting_gone_from_the_current_run_is_a_difference():
    assert study_identity.differences({"epochs": 10, "gone": 1}, {"epochs": 10}) == [
        "gone: 1 → '(unset)'"
    ]
    # A recorded identity without the dataset's fingerprint (no setting of that name).
    assert study_identity.differences({"epochs": 10}, {"epochs": 10, "dataset": "sample"}) == [
        "dataset: '(unset)' → 'sample'"
    ]


def test_a_resume_counts_failed_trials_as_kept_and_says_nothing_of_none_interrupted(tmp_path):
    study_identity.check_and_record(settings(tmp_path), tmp_path / "out")
    study = tmp_path / "out" / "study"
    tl.write_trials(
        str(study / tl.TRIALS_FILE),
        [
            tl.make_trial("1", {}, state=TrialState.SUCCEEDED),
            tl.make_trial("2", {}, state=TrialState.INFEASIBLE),
        ],
    )
    assert study_identity.check_and_record(settings(tmp_path), tmp_path / "out") == (
        f"resuming the study in {study}: 1 trial(s) done, reused; 1 failed, kept"
    )


def test_the_recorded_settings_are_the_listed_ones(tmp_path):
    recorded = study_identity.identity(settings(tmp_path))
    # `objectives` only when they are more than the metric tag (studies recorded before it)
    assert set(recorded) == {*STUDY_SETTINGS, "dataset", "search_space_content"} - {"objectives"}
    assert "max_trials" not in recorded and "parallel_trials" not in recorded


def test_a_default_in_conflict_with_an_explicit_setting_is_clamped_and_said():
    notes: list[str] = []
    s = load_settings(overrides={"max_trials": 1}, defaults=LOCAL_RUN_DEFAULTS, notes=notes)
    assert (s.study.max_trials, s.study.parallel_trials) == (1, 1)
    assert notes == ["parallel_trials lowered from its default 2 to max_trials=1"]
    with pytest.raises(SettingsError, match=r"parallel_trials=2: .*\[1, max_trials=1\]"):
        load_settings(overrides={"max_trials": 1, "parallel_trials": 2}, environ={})


def test_an_image_size_beyond_memory_is_refused_with_the_numbers(tmp_path):
    big = settings(tmp_path, image_size=5000)
    with pytest.raises(SettingsError) as refused:
        local_preflight.check_memory(big, memory=24 << 30)
    message = str(refused.value)
    assert message.startswith("image_size=5000: training would need ~")
    assert "5000×5000 px × batch 32 × 2 logical replica(s) × 2 parallel trial(s)" in message
    limit = int(message.rsplit("image_size <= ", 1)[1].split()[0])
    assert local_preflight.planned_bytes(big, limit) <= 0.8 * (24 << 30)
    local_preflight.check_memory(settings(tmp_path, image_size=limit), memory=24 << 30)
    local_preflight.check_memory(settings(tmp_path, image_size=300), memory=24 << 30)


def test_a_trial_with_workers_counts_a_process_per_replica_in_the_memory_estimate(tmp_path):
    one, two = settings(tmp_path, image_size=300), settings(tmp_path, image_size=300)
    two = two.replace(trial_workers=1)
    assert local_preflight.planned_bytes(two) == 2 * local_preflight.planned_bytes(one)
    with pytest.raises(SettingsError) as refused:
        local_preflight.check_memory(two.replace(image_size=5000), memory=24 << 30)
    assert "× 2 parallel trial(s) × 2 processes per trial (trial_workers=1)," in str(refused.value)


@pytest.mark.parametrize("cgroup", ["v2", "v1"])
def test_in_a_memory_limited_container_the_limit_not_the_hosts_memory_bounds_the_image_size(
    tmp_path, monkeypatch, cgroup
):
    """A 64 GiB host, a container limited to 2 GiB: 256 px would die of OOM there, later."""
    real_sysconf = os.sysconf
    host = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": (64 << 30) // 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: host.get(name) or real_sysconf(name))
    limit, absent = tmp_path / "limit", tmp_path / "absent"
    limit.write_text(f"{2 << 30}\n")
    files = (limit, absent) if cgroup == "v2" else (absent, limit)
    monkeypatch.setattr(local_preflight, "MEMORY_LIMIT_FILES", files)
    with pytest.raises(SettingsError) as refused:
        local_preflight.check_memory(settings(tmp_path, image_size=256))
    assert "more than 80% of this machine's 2 GiB; expected image_size <= " in str(refused.value)
    limit.write_text("max\n")  # cgroup v2's word for no limit: the host's memory
    local_preflight.check_memory(settings(tmp_path, image_size=256))
    assert local_preflight.machine_memory() == 64 << 30


def test_tfds_without_network_is_refused_unless_already_prepared(tmp_path):
    unreachable = ("host.invalid", 443)  # .invalid never resolves (RFC 2606)
    data_dir = str(tmp_path / "tfds")
    with pytest.raises(SettingsError, match=r"^source=tfds:cassava: not prepared in .*tfds and"):
        local_preflight.check_tfds_reachable("tfds:cassava", data_dir, host=unreachable)
    info = tmp_path / "tfds" / "cassava" / "0.1.0" / "dataset_info.json"
    info.parent.mkdir(parents=True)
    info.write_text("{}")
    local_preflight.check_tfds_reachable("tfds:cassava", data_dir, host=unreachable)
    assert local_preflight.tfds_data_dir(str(tmp_path / "out")).startswith(str(tmp_path / "out"))


def test_more_logical_replicas_than_cores_warns_with_the_numbers(tmp_path):
    line = local_preflight.replica_warning(settings(tmp_path, trial_accelerator_count=8), cores=2)
    assert line is not None and "trial_accelerator_count=8" in line and "2 core(s)" in line
    assert "= 256" in line
    assert local_preflight.replica_warning(settings(tmp_path), cores=2) is None


def test_run_refuses_a_busy_output_and_an_image_size_beyond_memory_in_one_line(tmp_path):
    from tests.test_local_cli import _one_line_error

    out = tmp_path / "out"
    holder = hold(out / "run.lock")
    try:
        busy = f"is in use by another run (pid {holder.pid}, started "
        _one_line_error(["run", "--output", str(out)], busy)
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in out.iterdir()) == ["run.lock"]  # nothing else written
    big = tmp_path / "big"
    _one_line_error(["run", "--image-size", "5000", "--output", str(big)], "image_size=5000")
    assert not big.exists()


def test_a_setting_listed_after_the_study_was_recorded_is_no_difference_at_its_default():
    recorded = {"epochs": 10}
    assert study_identity.differences(recorded, {"epochs": 10, "model": "cnn"}) == []
    assert study_identity.differences(recorded, {"epochs": 10, "model": "resnet50"}) == [
        "model: '(unset)' → 'resnet50'"
    ]
