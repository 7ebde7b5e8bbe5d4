"""Issue 52: `run --prepare-workers 2` under the run's fork server.

The data step of a local run is forked from the run's preloaded process
(`pipelines/jobs/step_process.py`); its worker processes are spawned from that child
(`dataprep/fanout.py`, `spawn`: a forked TensorFlow's threads would not survive another
fork). The forked step with two workers writes what one process writes.
"""

from __future__ import annotations

import pytest

from dataprep.prepare import prepare_dataset
from pipelines.jobs import fork_client, replica_env, step_process
from tests.conftest import ROOT
from tests.test_prepare import SIZE, make_folder, shard_bytes

PREPARE = "dataprep.prepare"


@pytest.mark.slow
def test_a_forked_data_step_runs_two_worker_processes(monkeypatch, capsys, tmp_path):
    source = make_folder(tmp_path / "src")
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)  # the server's environment
    monkeypatch.delenv(fork_client.ENV, raising=False)
    monkeypatch.chdir(ROOT)
    server = fork_client.ForkServer.start(
        cwd=str(ROOT),
        log_path=str(tmp_path / "server.log"),
        modules=(PREPARE,),
        env=replica_env.base_env(),
    )
    try:
        assert server.ready(120), server.unavailable
        monkeypatch.setenv(fork_client.ENV, server.address)
        result = step_process.run_module(
            PREPARE,
            [
                f"--source={source}",
                f"--output={tmp_path / 'two'}",
                f"--image_size={SIZE}",
                "--prepare_workers=2",
            ],
        )
    finally:
        server.close()

    assert capsys.readouterr().out.splitlines()[0] == f"$ python -m {PREPARE} (forked)"
    one = prepare_dataset(str(source), str(tmp_path / "one"), image_size=SIZE)
    assert shard_bytes(tmp_path / "two") == shard_bytes(tmp_path / "one")
    assert result["metadata"]["splits"] == one["splits"]
