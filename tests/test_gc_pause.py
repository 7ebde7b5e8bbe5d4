"""The collector paused while TensorFlow is imported, and left as it was found."""

from __future__ import annotations

import gc
import json

import pytest

from tests.conftest import python_stdout
from trainer.gc_pause import collector_paused


def test_the_collector_is_off_inside_and_what_was_made_is_frozen() -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        with collector_paused():
            assert not gc.isenabled()
            made = [[i] for i in range(1000)]  # tracked containers
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(made)
    finally:
        gc.unfreeze()


def test_a_disabled_collector_stays_disabled_even_when_the_block_fails() -> None:
    gc.disable()
    try:
        try:
            with collector_paused():
                raise RuntimeError("import failed")
        except RuntimeError:
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


@pytest.mark.parametrize(
    "load",
    [
        "from trainer.task import preload; preload()",  # trials and the final job's replicas
        "import trainer.evaluate",  # the evaluation step's process
        "import dataprep.prepare",  # the preparation step's process
    ],
)
def test_tensorflow_is_imported_with_the_collector_paused(load: str) -> None:
    probe = (
        "import gc, json, sys\n"
        "collections = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and collections.append(1))\n"
        f"{load}\n"
        "print(json.dumps({'tf': 'tensorflow' in sys.modules, 'collections': len(collections),"
        " 'frozen': gc.get_freeze_count(), 'enabled': gc.isenabled()}))\n"
    )
    facts = json.loads(python_stdout(probe).splitlines()[-1])
    assert facts["tf"] and facts["enabled"]
    assert facts["frozen"] > 100_000  # TensorFlow's and Keras' objects
    assert facts["collections"] < 50  # ~640 with the collector running (12 here: before it)
