"""The target registry (`pipelines.wiring.TARGETS`): every part of every target resolves, and
the CLI reaches a target only through it (docs/targets.md).

This module is also the client of a throw-away target, `fake`, registered by a fixture: the
functions below `# The fake target's client` are its `dispatch.Client`, so sending through
it is the dry run of the "adding a target" recipe's CLI side.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from pipelines.app import cli, dispatch
from pipelines.settings import SECTION_OF, Settings, SettingsError, load_settings
from pipelines.wiring import TARGETS, Binding, Target, binding_for
from tests.conftest import ROOT

CLIENT_FUNCTIONS = [
    name for name, _ in inspect.getmembers(dispatch.Client, inspect.isfunction) if name[0] != "_"
]
IMAGES = {
    "HPT_TRAINER_IMAGE": "registry.example.com/hpt/trainer:v1",
    "HPT_COMPONENTS_IMAGE": "registry.example.com/hpt/components:v1",
}


def one_line_error(result: Any, message: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0] == f"hpt-pipeline: error: {message}"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli.app, list(args), catch_exceptions=False)


# --------------------------------------------------------------------------- the registry


def test_the_client_interface_has_the_six_functions_docs_targets_md_names() -> None:
    assert sorted(CLIENT_FUNCTIONS) == sorted(
        ["run_settings", "send_run", "send_schedule", "schedule_settings"]
        + ["schedule_table", "change_schedule"]
    )
    assert all(
        f"`{name}`" in (ROOT / "docs" / "targets.md").read_text() for name in CLIENT_FUNCTIONS
    )


@pytest.mark.parametrize("name", TARGETS)
def test_every_target_has_a_binding_a_preflight_and_a_client_unless_it_runs_here(name) -> None:
    target = TARGETS[name]
    assert target.name == name
    assert isinstance(target.binding, Binding)
    assert binding_for(name) is target.binding
    module, _, function = target.preflight.partition(":")
    assert inspect.signature(
        getattr(importlib.import_module(module), function)
    ).parameters.keys() == {"settings"}
    assert (target.client is None) == target.runs_here  # what runs here is sent nowhere
    if target.client:
        client = importlib.import_module(target.client)
        for function_name in CLIENT_FUNCTIONS:
            expected = inspect.signature(getattr(dispatch.Client, function_name))
            found = inspect.signature(getattr(client, function_name))
            assert list(found.parameters) == list(expected.parameters)[1:], function_name
        assert target.flags and "--target" in target.flag_note


def test_an_unknown_target_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match=r"^target='aws': expected one of local, vertex, kubeflow$"
    ):
        binding_for("aws")


def test_each_settings_section_names_real_fields_and_no_field_has_two_targets() -> None:
    fields = set(SECTION_OF)
    claimed = [field for target in TARGETS.values() for field in target.settings]
    assert set(claimed) <= fields
    assert len(claimed) == len(set(claimed))
    assert {f for f in fields if f.startswith("kubeflow_")} <= TARGETS["kubeflow"].settings


def _commands_taking_target() -> dict[str, list[str]]:
    """Every command with a `--target` flag that sends: its parameters by name."""
    from pipelines.app import cloud_commands, schedule_actions

    commands = [cloud_commands.submit, cloud_commands.schedule_create]
    commands += [
        getattr(schedule_actions, f"schedule_{a}") for a in ("list", "pause", "resume", "delete")
    ]
    return {c.__name__: list(inspect.signature(c).parameters) for c in commands}


def test_each_targets_flags_are_flags_of_the_sending_commands_and_have_one_owner() -> None:
    params = {p for names in _commands_taking_target().values() for p in names}
    owned = [flag for target in TARGETS.values() for flag in target.flags]
    assert set(owned) <= params
    assert len(owned) == len(set(owned))


@pytest.mark.parametrize(
    "args",
    [
        ["submit", "--target=local", "--dry-run"],
        ["schedule", "create", "--cron=0 3 * * 1", "--target=local", "--dry-run"],
        ["schedule", "list", "--target=local"],
        ["schedule", "pause", "abc", "--target=local"],
    ],
)
def test_a_target_that_sends_nothing_is_refused_by_the_sending_commands(args) -> None:
    one_line_error(invoke(*args), "--target=local: expected one of vertex, kubeflow")


def test_force_is_a_vertex_flag_refused_for_kubeflow_not_dropped() -> None:
    """The serving container's end of availability is Vertex's: Kubeflow used to ignore it."""
    one_line_error(
        invoke("schedule", "create", "--target=kubeflow", "--cron=0 3 * * 1", "--force"),
        "--force: a Vertex flag, not used with --target kubeflow",
    )


# --------------------------------------------------------------------------- a throw-away target

SENT: list[tuple[Any, ...]] = []


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Target:
    """`fake` registered as docs/targets.md says: one line in `TARGETS`, this module its client."""
    for name in IMAGES:
        monkeypatch.setenv(name, IMAGES[name])
    target = Target(
        "fake",
        runs_here=False,
        client=__name__,
        preflight=f"{__name__}:preflight",
        settings=frozenset({"display_name"}),
        flags=("shout",),
        flag_note="only used with --target fake",
    )
    monkeypatch.setitem(TARGETS, "fake", target)
    SENT.clear()
    return target


def test_submit_reaches_a_registered_target_through_its_client(fake, tmp_path) -> None:
    template = tmp_path / "t.yaml"
    result = invoke(
        "submit",
        "--target=fake",
        f"--template={template}",
        "--param=a=1",
        "--display-name=x",
        "--dry-run",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "fake run x\n"
    ((kind, settings, sending, flags),) = SENT
    assert kind == "run" and settings.cloud.display_name == "x"
    assert sending == dispatch.Sending(template, ["a=1"], True, None)
    assert flags["target"] == "fake" and flags["enable_caching"] is None


def test_schedule_commands_reach_a_registered_target_through_its_client(fake) -> None:
    created = invoke(
        "schedule", "create", "--target=fake", "--cron=0 3 * * 1", "--max-concurrent-runs=2"
    )
    assert created.exit_code == 0, created.output
    listed = invoke("schedule", "list", "--target=fake")
    assert "│ s1 │" in listed.stdout  # the table of the fake client's rows
    paused = invoke("schedule", "pause", "s1", "--target=fake")
    assert paused.stdout == "paused s1 on fake\n"
    assert [entry[0] for entry in SENT] == ["schedule", "change"]
    assert SENT[0][2].cron == "0 3 * * 1" and SENT[0][2].max_concurrent_runs == 2


def test_a_registered_targets_preflight_runs_before_anything_is_sent(fake) -> None:
    one_line_error(
        invoke("submit", "--target=fake", "--display-name=refuse-me"),
        "display_name=refuse-me: the fake target refuses it",
    )
    assert SENT == []


def test_another_targets_flag_is_refused_with_its_owners_note(fake) -> None:
    one_line_error(
        invoke("submit", "--target=fake", "--project=p"),
        "--project: a Vertex flag, not used with --target fake",
    )
    one_line_error(
        invoke("submit", "--target=fake", "--host=http://kfp:8080"),
        "--host: only used with --target kubeflow",
    )
    one_line_error(
        invoke("submit", "--target=nope"), "--target=nope: expected one of vertex, kubeflow, fake"
    )
    assert SENT == []


def test_a_flag_of_a_registered_target_is_refused_for_the_others(fake) -> None:
    dispatch.refuse_other_flags(fake, {"shout": True})
    with pytest.raises(SettingsError, match=r"^--shout: only used with --target fake$"):
        dispatch.refuse_other_flags(TARGETS["vertex"], {"shout": True, "project": None})
    with pytest.raises(SettingsError, match=r"^--experiment: only used with --target kubeflow$"):
        dispatch.refuse_other_flags(
            TARGETS["vertex"], {"experiment": "e"}, {"experiment": "kubeflow"}
        )
    dispatch.refuse_other_flags(
        TARGETS["kubeflow"], {"experiment": "e"}, {"experiment": "kubeflow"}
    )


# The fake target's client (`dispatch.Client`) and preflight.


def preflight(settings: Settings) -> None:
    if settings.cloud.display_name == "refuse-me":
        raise SettingsError("display_name=refuse-me: the fake target refuses it")


def run_settings(config: Path | None, flags: Mapping[str, Any]) -> Settings:
    return load_settings(config=config, overrides={"display_name": flags.get("display_name")})


def send_run(settings: Settings, sending: dispatch.Sending, flags: Mapping[str, Any]) -> None:
    SENT.append(("run", settings, sending, dict(flags)))
    typer.echo(f"fake run {settings.cloud.display_name}")


def send_schedule(
    settings: Settings, sending: dispatch.Sending, when: dispatch.ScheduleFlags
) -> None:
    SENT.append(("schedule", settings, when))


def schedule_settings(config: Path | None, flags: Mapping[str, Any]) -> Settings:
    return load_settings(config=config)


def schedule_table(
    settings: Settings, flags: Mapping[str, Any]
) -> tuple[list[dict[str, str]], str, str]:
    return [{"id": "s1"}], "here", "fake schedules at here"


def change_schedule(action: str, settings: Settings, schedule: str, *, confirm: bool) -> str:
    SENT.append(("change", action, schedule, confirm))
    return f"{action}d {schedule} on fake"
