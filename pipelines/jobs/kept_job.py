"""The local final job, kept with its study: a rerun reuses it finished or resumes it.

kfp.local runs every task again on a rerun, and the `job_dir` artifact the final job spec
reserves is a new folder each time. Locally the final job runs instead in
`<study>/final/<key>`, `key` a digest of its worker pools with the dataset's path left out
(a rerun prepares the same data into a new folder; the study's identity,
`pipelines/app/study_identity.py`, holds it to the same source and settings). So a rerun
with the same best trial, settings and replicas:

* reuses a job that finished: `done.json`, written once every replica exited 0, beside
  its exported model;
* resumes one that was interrupted (Ctrl-C, a closed terminal, `kill -9`): the trainer
  restores the latest checkpoint under `AIP_CHECKPOINT_DIR` (`<job>/checkpoints/`, the
  chief's). Every replica reads that one checkpoint before the first step, which none can
  take without the others (MultiWorkerMirroredStrategy), so chief and workers resume
  after the same epoch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines.jobs import fork_client, local_job, model_artifact, replica_env
from trainer.contract import WORKER_CHECKPOINT_PREFIX, flag

FINAL_DIR = "final"  # in the study folder: one folder per final job (key)
DONE_FILE = "done.json"
CHECKPOINT_STATE = "checkpoint"  # tf.train.CheckpointManager's index of the latest one
_DATA_FLAG = flag("data", "")
_KEY_CHARS = 16


def job_key(worker_pool_specs: Sequence[Mapping[str, Any] | str]) -> str:
    """A digest of the pools: what the replicas run, less the dataset's path (per run)."""
    pools = [json.loads(p) if isinstance(p, str) else dict(p) for p in worker_pool_specs]
    for pool in pools:
        spec = dict(pool.get("container_spec") or {})
        spec["args"] = [
            _DATA_FLAG if str(a).startswith(_DATA_FLAG) else a for a in spec.get("args", [])
        ]
        pool["container_spec"] = spec
    text = json.dumps(pools, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:_KEY_CHARS]


def job_dir(study_dir: str, worker_pool_specs: Sequence[Mapping[str, Any] | str]) -> str:
    """`<study_dir>/final/<key>`: where this final job runs, the same on every rerun."""
    return os.path.join(study_dir, FINAL_DIR, job_key(worker_pool_specs))


def finished(base: str) -> bool:
    """Whether the job in `base` finished: its `done.json` and its exported model are there."""
    card = os.path.join(base, model_artifact.MODEL_SUBDIR, "model.json")
    return os.path.isfile(os.path.join(base, DONE_FILE)) and os.path.isfile(card)


def interrupted(base: str) -> bool:
    """Whether the job in `base` ran before and left a checkpoint to resume from."""
    checkpoints = replica_env.output_dirs(base)["AIP_CHECKPOINT_DIR"]
    return os.path.isfile(os.path.join(checkpoints, CHECKPOINT_STATE))


def _remove_worker_copies(base: str) -> None:
    """Drop the throwaway checkpoints killed workers left (`trainer/train.py` writes them)."""
    checkpoints = replica_env.output_dirs(base)["AIP_CHECKPOINT_DIR"]
    for name in os.listdir(checkpoints):
        if name.startswith(WORKER_CHECKPOINT_PREFIX):
            shutil.rmtree(os.path.join(checkpoints, name), ignore_errors=True)


def run(
    worker_pool_specs: Sequence[Mapping[str, Any] | str],
    base_output_directory: str,
    study_dir: str,
    echo: Callable[[str], None] = print,
) -> str:
    """Run the final job in its kept folder (or reuse it, finished); return the folder.

    Without a `study_dir` (a local spec run outside `hpt-pipeline run`) the job runs in
    `base_output_directory`, as on Vertex, and nothing is kept.
    """
    base = job_dir(study_dir, worker_pool_specs) if study_dir else base_output_directory
    if finished(base):
        echo(f"final job: reused, it finished in an earlier run ({base})")
        return base
    if interrupted(base):
        echo(f"final job: resuming the one an earlier run left ({base})")
        _remove_worker_copies(base)
    commands = local_job.pool_commands(worker_pool_specs)
    log = os.path.join(local_job.job_local_dir(base), fork_client.LOG_FILE)
    with fork_client.session(commands, log_path=log) as server:
        local_job.run_custom_job(
            worker_pool_specs=worker_pool_specs, base_output_directory=base, fork_server=server
        )
    partial = os.path.join(base, f".{DONE_FILE}.partial")
    with open(partial, "w", encoding="utf-8") as f:
        json.dump({"key": job_key(worker_pool_specs)}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, os.path.join(base, DONE_FILE))
    return base
