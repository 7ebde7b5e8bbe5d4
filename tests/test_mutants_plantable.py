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
        assert tests and all((ROOT / t.split("::")[0]).is_file() for t in tests), (module, tests)
        for test in (t for t in tests if "::" in t):  # a test picked out of a slow file
            path, name = test.split("::")
            assert f"def {name}(" in (ROOT / path).read_text(), test
    assert all(covering(m) for m in DEFAULT)


def test_a_survivors_rerun_keeps_the_earlier_kills_and_scores_what_the_rerun_found():
    """`make mutmut ARGS=--survivors`: only the mutants left are rerun; kills stand."""
    from tests.mutmut_run import merged, scores

    earlier = {
        "m.x_f__mutmut_1": "killed",
        "m.x_f__mutmut_2": "survived",
        "m.x_g__mutmut_1": "no tests",
    }
    now = {name: "not checked" for name in earlier} | {"m.x_f__mutmut_2": "killed"}
    found = merged(earlier, now, ["m.x_f__mutmut_2", "m.x_g__mutmut_1"])
    assert found == {
        "m.x_f__mutmut_1": "killed",
        "m.x_f__mutmut_2": "killed",
        "m.x_g__mutmut_1": "not checked",
    }
    counts = scores(found)["m"]
    assert (counts["killed"], counts["total"]) == (2, 3)
    assert counts["names: m.x_g__mutmut_1 (not checked)"] == 1


def test_a_test_file_that_passes_only_after_another_is_reported_failing_alone(tmp_path):
    """`tests/run_each_file.py`: the second file relies on the first having imported json."""
    from tests.run_each_file import main

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(
        "import sys\nimport json\n\ndef test_a():\n    sys.modules['shared'] = json\n"
    )
    (tmp_path / "tests" / "test_b.py").write_text(
        "import sys\n\ndef test_b():\n    assert 'shared' in sys.modules\n"
    )
    import io
    from contextlib import redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["--root", str(tmp_path)])
    lines = out.getvalue().splitlines()
    assert code == 1
    assert lines[0].startswith("ok ") and "tests/test_a.py" in lines[0]
    assert any(line.startswith("FAILED") and "tests/test_b.py" in line for line in lines)
    assert lines[-1] == "1/2 test files pass alone"
