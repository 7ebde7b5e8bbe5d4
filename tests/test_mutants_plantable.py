"""Every planted bug of `make mutants` still finds its line, and its tests still exist.

`make mutants` takes minutes and is not part of `make test`; when code moves, a mutant whose
line no longer reads as written would report "missing" there, long after the change. This
reads the same lines the planting does (`tests/mutants.py:plant`), without running anything.
"""

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.mutants import MUTANTS


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda x: x.name)
def test_each_mutant_plants_on_exactly_one_line_and_names_tests_that_exist(mutant):
    lines = (ROOT / mutant.path).read_text().splitlines()
    for old, _new in mutant.edits:
        hits = [line for line in lines if line.strip() == old.strip()]
        assert len(hits) == 1, f"{mutant.path}: {len(hits)} lines read {old!r}"
    for test in mutant.tests:
        assert (ROOT / test.split("::")[0]).is_file(), test
        if "::" in test:
            name = test.split("::")[1].split("[")[0]
            assert f"def {name}(" in Path(ROOT / test.split("::")[0]).read_text(), test
