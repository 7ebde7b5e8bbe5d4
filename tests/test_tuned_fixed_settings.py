"""A fixed trainer setting the study tunes (`epochs`, `batch_size`) is on a trial's command
line once: the study's value, never the run's fixed one before it (argparse takes the last,
so the fixed one was dead weight a reader took for the truth). And one default each.
"""

from __future__ import annotations

from types import SimpleNamespace

from components.job_specs import final_job_spec, trial_job_spec
from pipelines.settings import Settings
from pipelines.settings_space import study_space
from pipelines.study.trial_runner import trial_specs
from pipelines.targets.kubeflow.trial_template import TrialPods, trial_container
from pipelines.targets.vertex.hpt_job import hpt_job_payload
from trainer.contract import TRAINER_HYPERPARAMETERS

SPACE = (
    "parameters:\n"
    "  - {id: epochs, type: discrete, values: [2, 4]}\n"
    "  - {id: batch_size, type: discrete, values: [8, 16]}\n"
    "  - {id: learning_rate, type: double, min: 0.001, max: 0.1, scale: log}\n"
)
FIXED = dict(model="cnn", weights="none", epochs=3, batch_size=32)
FIXED |= dict(metric_tag="val_accuracy", precision="float32", seed=7)
MACHINE = dict(machine_type="n1-standard-4", accelerator_type="", accelerator_count=0)


def dataset() -> SimpleNamespace:
    return SimpleNamespace(uri="/r/prepare-dataset/dataset", path="/r/prepare-dataset/dataset")


def artifact(name: str) -> SimpleNamespace:
    return SimpleNamespace(uri=f"/r/{name}", path=f"/r/{name}", metadata={})


def study(tmp_path):
    (tmp_path / "space.yaml").write_text(SPACE)
    return study_space(Settings(search_space=str(tmp_path / "space.yaml"), epochs=3))


def trial_pools(space, worker_count: int = 0) -> list:
    pools, _ = trial_job_spec.python_func(
        dataset=dataset(),
        trainer_image="img:1",
        **FIXED,
        **MACHINE,
        worker_count=worker_count,
        study_dir="",
        shared_root="",
        study_spec_parameters=space.to_study_spec_parameters(),
        study=artifact("study"),
    )
    return pools


def flags(args: list[str], name: str) -> list[str]:
    return [a for a in args if a.startswith(f"--{name}=")]


def test_a_tuned_epochs_and_batch_size_are_on_a_local_trials_command_line_once(tmp_path):
    space = study(tmp_path)
    proposed = {"epochs": 4, "batch_size": 8, "learning_rate": 0.01}
    pools = trial_specs(trial_pools(space, worker_count=1), proposed)
    assert len(pools) == 2  # the chief's and the worker's command lines alike
    for pool in pools:
        args = pool["container_spec"]["args"]
        assert flags(args, "epochs") == ["--epochs=4"]
        assert flags(args, "batch_size") == ["--batch_size=8"]
        assert "--seed=7" in args and "--model=cnn" in args  # the untuned fixed ones stay


def test_a_tuned_epochs_is_once_in_the_vertex_trial_as_the_service_appends_it(tmp_path):
    space = study(tmp_path)
    payload = hpt_job_payload(
        display_name="s",
        study_spec_metrics=space.to_study_spec_metrics(),
        study_spec_parameters=space.to_study_spec_parameters(),
        study_spec_algorithm="ALGORITHM_UNSPECIFIED",
        study_spec_measurement_selection_type="BEST_MEASUREMENT",
        max_trial_count=2,
        parallel_trial_count=1,
        max_failed_trial_count=0,
        worker_pool_specs=trial_pools(space),
        base_output_directory="gs://b/study",
    )
    args = payload["trial_job_spec"]["worker_pool_specs"][0]["container_spec"]["args"]
    appended = [f"--{p['parameter_id']}=V" for p in payload["study_spec"]["parameters"]]
    assert flags(args + appended, "epochs") == ["--epochs=V"]  # Vertex's `--<id>=<value>`
    assert flags(args + appended, "batch_size") == ["--batch_size=V"]


def test_a_tuned_epochs_is_once_in_a_katib_trials_container(tmp_path):
    space = study(tmp_path)
    pods = TrialPods(worker_pool_specs=trial_pools(space), cpu="1", memory="2Gi")
    container = trial_container(pods, space)
    assert flags(container.args, "epochs") == ["--epochs=${trialParameters.epochs}"]
    assert flags(container.args, "batch_size") == ["--batch_size=${trialParameters.batch_size}"]


def test_the_final_job_trains_the_picked_epochs_once():
    pools, _ = final_job_spec.python_func(
        dataset=dataset(),
        best_parameters={"epochs": 4.0, "learning_rate": 0.01},
        trainer_image="img:1",
        **FIXED,
        **MACHINE,
        worker_count=1,
        shared_root="",
        job_dir=artifact("job"),
    )
    for pool in pools:
        args = pool["container_spec"]["args"]
        assert flags(args, "epochs") == ["--epochs=4"]
        assert flags(args, "batch_size") == ["--batch_size=32"]  # not picked: the run's


def test_untuned_epochs_keep_the_runs_value_and_the_trainer_and_settings_share_one_default():
    space = study_space(Settings(epochs=3))
    args = trial_pools(space)[0]["container_spec"]["args"]
    assert flags(args, "epochs") == ["--epochs=3"]
    for name in ("epochs", "batch_size"):
        assert getattr(Settings().training, name) == TRAINER_HYPERPARAMETERS[name].default
