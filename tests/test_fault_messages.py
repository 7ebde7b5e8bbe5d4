"""Issue 42, case 6: the smaller messages each name the bad value and what is expected."""

from __future__ import annotations

import pytest

from pipelines.jobs.machines import MachineError, check_machine
from pipelines.settings import SettingsError, load_settings


def test_a_bad_environment_value_names_its_variable():
    with pytest.raises(SettingsError, match=r"^HPT_EPOCHS='abc': expected int$"):
        load_settings(environ={"HPT_EPOCHS": "abc"})
    assert (
        load_settings(environ={"HPT_EPOCHS": "abc"}, overrides={"epochs": 3}).training.epochs == 3
    )


def test_a_param_of_the_wrong_type_says_what_it_expects_in_words():
    from pipelines import templates

    spec = {
        "pipelineInfo": {"name": "p"},
        "root": {
            "inputDefinitions": {
                "parameters": {
                    "max_trial_count": {"parameterType": "NUMBER_INTEGER"},
                    "use_eval_threshold": {"parameterType": "BOOLEAN"},
                }
            }
        },
    }
    with pytest.raises(
        SettingsError, match=r"^--param max_trial_count='abc': expected an integer$"
    ):
        templates.parameter_values(spec, ["max_trial_count=abc"])
    with pytest.raises(SettingsError, match=r"expected true or false$"):
        templates.parameter_values(spec, ["use_eval_threshold=maybe"])


@pytest.mark.parametrize(
    ("machine", "accelerator", "count", "message"),
    [
        ("n1-superfast-99", "NVIDIA_TESLA_T4", 1, "not an N1 machine type (expected n1-standard"),
        ("a2-highgpu-3g", "NVIDIA_TESLA_A100", 3, "not a machine type of its family (expected"),
    ],
)
def test_an_unknown_machine_type_is_said_so_not_a_gpu_combination(
    machine, accelerator, count, message
):
    with pytest.raises(MachineError) as refused:
        check_machine(machine, accelerator, count, what="trial_machine_type")
    assert str(refused.value).startswith(f"trial_machine_type={machine}: {message}")
    assert "combination" not in str(refused.value)
    check_machine("n1-standard-4", "NVIDIA_TESLA_T4", 1, what="trial_machine_type")
    check_machine("e2-standard-4", None, 0, what="trial_machine_type")  # not listed: Vertex's call


def test_an_unknown_region_is_one_line_with_the_regions_sorted():
    from pipelines.targets.vertex.cli.preflight import check_region

    with pytest.raises(SettingsError) as refused:
        check_region("mars-central1")
    message = str(refused.value)
    assert message.startswith("region=mars-central1: not a Vertex AI region (expected one of ")
    assert "frozenset" not in message and "africa-south1, asia-east1" in message
    check_region("europe-west4")


def test_cjk_class_names_are_drawn_or_numbered_and_no_glyph_warning_is_raised(tmp_path):
    import warnings

    from pipelines.reports import eval_report, plotting

    names = ["猫", "犬"]
    report = {
        "class_names": names,
        "confusion_matrix": [[3, 1], [0, 4]],
        "split": "test",
        "count": 8,
        "test_accuracy": 0.875,
        "test_loss": 0.3,
        "per_class": {n: {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 4} for n in names},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's missing-glyph warning would raise here
        fig = eval_report.confusion_matrix_figure(report)
        fig.canvas.draw()
        page = eval_report.write_report(report, tmp_path).read_text()
    shown = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    if plotting.font_for(names) is None:  # the stated fallback: numbers, named on the page
        assert shown == ["#0", "#1"]
        assert "<td>#0 猫</td>" in page and "<td>#1 犬</td>" in page
    else:
        assert shown == names


def test_the_study_progress_line_fits_80_columns():
    from pipelines.study import progress_lines

    best = {
        "id": "7",
        "finalMeasurement": {"metrics": [{"metricId": "val_accuracy", "value": 0.9}]},
    }
    snap = progress_lines.StudyProgress(
        total=12, done=10, succeeded=8, failed=1, early_stopped=0, running=2, best=best, last=None
    )
    view = progress_lines.ProgressView(enabled=True, metric="val_accuracy")
    view.start(snap)
    try:
        console = view.progress.console
        lines = console.render_lines(
            view.progress.get_renderable(), console.options.update(width=80)
        )
    finally:
        view.stop()
    line = "".join(seg.text for seg in lines[0]).rstrip()
    assert "10/12" in line and line.endswith("best val_accuracy=0.9 (trial 7)"), line
    assert "…" not in line


def test_lineage_labels_are_cut_at_a_word_and_edges_that_skip_layers_go_around_boxes():
    import re

    from pipelines.lineage import svg as svg_lib
    from pipelines.lineage.graph import LineageGraph, Node

    graph = LineageGraph("run")
    graph.add(Node("a", "artifact", "dataset"))
    graph.add(Node("b", "execution", "tune-locally-with-a-rather-long-component-name"))
    graph.add(Node("c", "execution", "train"))
    graph.link("a", "b")
    graph.link("b", "c")
    graph.link("a", "c")  # skips b's layer
    page = svg_lib.svg(graph, ["a", "b", "c"], lambda n: "")

    assert ">tune-locally-with-a-rather-long-…</text>" in page  # after a word, not inside one
    boxes = [(int(x), int(y)) for x, y in re.findall(r'<rect x="(\d+)" y="(\d+)"', page)]
    routes = re.findall(r'<path d="(M[^"]+)" fill="none"', page)
    lane_routes = [r for r in routes if " H" in r]
    assert len(lane_routes) == 1  # a→c, the edge that skips a layer
    lane_x = int(re.search(r"H(\d+) V", lane_routes[0])[1])
    assert all(lane_x < x for x, _ in boxes)  # its lane is left of every box
