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


def test_every_module_mutmut_covers_exists_with_its_test_files():
    """`make mutmut MODULES=…` maps each module to its test files; none may have moved."""
    from tests.mutmut_run import COVERING, DEFAULT, covering

    for module, tests in COVERING.items():
        assert (ROOT / module).exists(), module
        assert tests and all((ROOT / t).is_file() for t in tests), (module, tests)
    assert all(covering(m) for m in DEFAULT)
