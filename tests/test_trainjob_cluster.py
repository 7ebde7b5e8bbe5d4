"""Two real trainer processes form a MultiWorkerMirroredStrategy cluster from TrainJob env alone.

Each process gets exactly the `trainer` section of the TrainJob `build_trainjob` makes (its
command, args and env) plus what Kubernetes adds to an Indexed Job's pod
(`JOB_COMPLETION_INDEX`). The JobSet host names do not resolve here, so the address pattern
(`HPT_NODE_ADDRESS`, the documented variable the TrainJob sets) is replaced by a loopback one:
that is the only change. No `TF_CONFIG` or `CLUSTER_SPEC` is given.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.jobs.worker_pools import training_worker_pool_specs
from pipelines.targets.kubeflow import trainjob
from pipelines.targets.kubeflow.kube import ReplicaPods
from tests.conftest import ROOT


def free_port_pair() -> str:
    """A loopback pattern `127.0.0.1:<p>{index}` whose ports <p>0 and <p>1 are free."""
    for stem in range(4300, 6500, 7):
        ports = [stem * 10, stem * 10 + 1]
        try:
            for port in ports:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return f"127.0.0.1:{stem}{{index}}"
    raise RuntimeError("no free port pair")


@pytest.mark.slow
def test_two_trainjob_nodes_train_together_and_only_node_0_exports(tmp_path, synthetic_data):
    base = tmp_path / "final"
    pools = training_worker_pool_specs(
        image_uri="local",
        command=["python", "-m", "trainer.task"],
        args=[f"--data={synthetic_data}", "--batch_size=16", "--epochs=2"],
        env={"TF_CPP_MIN_LOG_LEVEL": "2", "HPT_CPU_THREADS": "1"},
        worker_count=1,
    )
    job = trainjob.build_trainjob(
        "hpt-final-x", "team", pools, str(base), ReplicaPods("1", "2Gi"),
        override_field=trainjob.PATCHES,
    )  # fmt: skip
    trainer = job["spec"]["trainer"]
    assert trainer["numNodes"] == 2
    env = {e["name"]: e["value"] for e in trainer["env"]}
    assert env["HPT_NODE_ADDRESS"] == "hpt-final-x-node-0-{index}.hpt-final-x:2222"
    env["HPT_NODE_ADDRESS"] = free_port_pair()  # the JobSet's host names, mapped to loopback
    clean = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "CLUSTER_SPEC")}
    command = [sys.executable if w == "python" else w for w in trainer["command"]]
    procs, logs = [], []
    for index in range(trainer["numNodes"]):
        log = tmp_path / f"node-{index}.log"
        logs.append(log)
        node_env = {
            **clean,
            **env,
            "JOB_COMPLETION_INDEX": str(index),
            "CLOUD_ML_HP_METRIC_FILE": str(tmp_path / f"metrics-{index}"),
        }
        with log.open("w") as out:
            procs.append(
                subprocess.Popen(
                    [*command, *trainer["args"]],
                    env=node_env,
                    cwd=ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        codes = [p.wait(timeout=400) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    texts = [Path(log).read_text() for log in logs]
    assert codes == [0, 0], texts
    for text in texts:
        assert "MultiWorkerMirroredStrategy, 2 replica(s) in sync" in text
    assert "exported model to" in texts[0] and "exported model to" not in texts[1]
    card = json.loads((base / "model" / "model.json").read_text())
    assert card["training"]["replicas"] == 2
