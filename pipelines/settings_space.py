"""The study a run's settings ask for: their model's search space, checked, and objectives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.models import KnownModel, describe_model
from pipelines.settings import Settings, SettingsError
from pipelines.study import objectives as objective_rules
from pipelines.study.model_choice import models_of
from pipelines.study.options import check_algorithm
from pipelines.study.search_space import (
    SearchSpace,
    SearchSpaceError,
    load_search_space,
    preset_names,
    study_spec_metrics,
)
from trainer.contract import METRIC_GOALS, ContractError, metric_goal
from trainer.cost_metrics import BUILDER_METRICS_ATTRIBUTE
from trainer.models import check_weights


def settings_model(settings: Settings, *, importable: bool = False) -> KnownModel:
    """The settings' model, checked (a reference: imported and built in a process of its own).

    Args:
        settings: The run's settings.
        importable: Refuse a reference whose module cannot be imported here (`run`).

    Raises:
        SettingsError: An unusable model, in one line.
    """
    try:
        known = describe_model(settings.architecture.model, settings.data.image_size)
    except ContractError as err:
        raise SettingsError(str(err)) from None
    if importable and not known.checked:
        raise SettingsError(known.note)
    if known.checked:
        try:
            check_weights(known.spec, settings.architecture.weights)
        except ContractError as err:
            raise SettingsError(str(err)) from None
    if settings.data.image_size < known.spec.min_image_size:
        raise SettingsError(
            f"image_size={settings.data.image_size}: model {known.spec.name} needs at least "
            f"{known.spec.min_image_size} px per side"
        )
    return known


def fitting_presets(known: KnownModel) -> list[str]:
    """The packaged presets whose every parameter the model takes."""
    fit = []
    for name in preset_names():
        try:
            space = load_search_space(
                name, known.spec.all_hyperparameters(), open_ended=not known.checked
            )
        except SearchSpaceError:
            continue
        if not models_of(space):  # a model choice does not fit a model: it replaces it
            fit.append(name)
    return fit


def study_space(settings: Settings, known: KnownModel | None = None) -> SearchSpace:
    """The settings' search space (None: the model's default preset) with their metric.

    Raises:
        SearchSpaceError: A space the trainer, the model or the algorithm cannot take.
    """
    known = known or settings_model(settings)
    name = settings.study.search_space or known.spec.presets[0]
    try:
        space = load_search_space(
            name,
            known.spec.all_hyperparameters(),
            open_ended=not known.checked,
            model_flags=lambda model: _choice_flags(settings, model),
        )
    except SearchSpaceError as err:
        if name not in preset_names():
            raise
        fit = ", ".join(fitting_presets(known)) or "none (write one: see seeds.yaml)"
        raise SearchSpaceError(
            f"{err} — preset {name!r} does not fit model {known.spec.name}; presets that fit: {fit}"
        ) from None
    check_algorithm(space, settings.study.algorithm)
    metrics, _ = objective_rules.resolve(settings.study.objectives, (), settings.study.metric_tag)
    for model in models_of(space) or (settings.architecture.model,):
        _check_reported(settings, known if model == known.spec.name else None, model)
    return SearchSpace(space.parameters, metrics)


def weights_warning(
    settings: Settings, known: KnownModel | None = None, space: SearchSpace | None = None
) -> str:
    """One line when the search space freezes a backbone that `weights=none` leaves random.

    A preset that searches `trainable_blocks` below the backbone's depth (`transfer`) is
    meant for pretrained weights (imagenet or a file): a frozen random backbone passes noise
    to the head, and the study finds nothing. Empty when the combination is not that.
    `known` and `space`: the settings' model and search space, when already resolved.
    """
    known = known or settings_model(settings)
    spec = known.spec
    if not spec.pretrained or check_weights(spec, settings.architecture.weights) != "none":
        return ""
    space = space or study_space(settings, known)
    blocks = next((p for p in space.all_parameters() if p.parameter_id == "trainable_blocks"), None)
    depth = spec.all_hyperparameters()["trainable_blocks"].default
    lowest = (min(map(float, blocks.values)) if blocks.values else blocks.min) if blocks else None
    if lowest is None or float(lowest) >= float(depth):
        return ""
    name = settings.study.search_space or spec.presets[0]
    return (
        f"warning: search_space={name} with weights=none: its trainable_blocks from "
        f"{lowest:g} freeze a randomly initialised {spec.name} backbone (the head learns from "
        "noise); that space is meant for pretrained weights: pass --weights imagenet (or a "
        "weights file), or --search-space optimizer to train the whole network"
    )


def _check_reported(settings: Settings, known: KnownModel | None, model: str) -> None:
    """Refuse an objective `model` cannot report: a team's own metric needs its `hpt_metrics`.

    A reference not importable here is left to the trainer (its hook is not known).

    Raises:
        SettingsError: `objectives=<name>: model <m> does not report <metric> ...`, one line.
    """
    own = [o for o in settings.study.objectives if o.partition(":")[0] not in METRIC_GOALS]
    if not own:
        return
    known = known or settings_model(settings.replace(model=model))
    if known.spec.own_metrics or not known.checked:
        return
    metric = own[0].partition(":")[0]
    raise SettingsError(
        f"objectives={own[0]}: model {model} does not report {metric} (it reports "
        f"{', '.join(METRIC_GOALS)}); a team's own metric comes from its builder's "
        f"{BUILDER_METRICS_ATTRIBUTE} (docs/models.md)"
    )


def _choice_flags(settings: Settings, model: str) -> tuple[Any, bool]:
    """A model of the space's `model` choice, checked as the settings' own model is.

    The study's image size and weights apply to every model in the choice: a model that
    cannot take them is refused here, before anything runs. Unset weights mean each
    model's own default (`imagenet` for a backbone, none for cnn).

    Raises:
        SearchSpaceError: `model <name>: ...`, in one line.
    """
    try:
        known = settings_model(settings.replace(model=model))
    except SettingsError as err:
        raise SearchSpaceError(
            f"model {model} (in the search space's model choice): {err}"
        ) from None
    return known.spec.all_hyperparameters(), known.checked


def listed_objectives(settings: Settings) -> list[str]:
    """The run's objectives as the pipeline's `objectives` parameter.

    Empty when the metric tag is the only one, so that `--param metric_tag=…` alone still
    means `objectives: [metric_tag]`.
    """
    objectives, tag = settings.study.objectives, settings.study.metric_tag
    return [] if objectives == (tag,) else list(objectives)


def study_metric_spec(
    metric_tag: str, objectives: Sequence[str] = (), constraints: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], str]:
    """`study_spec_metrics` (one per objective, primary first) and the primary's goal.

    Args:
        metric_tag: The trainer's metric tag: the primary objective.
        objectives: Every objective (`name` or `name:max|min`); empty: `[metric_tag]`.
        constraints: Checked against the objectives here, so a bad one stops before the study.

    Raises:
        ContractError: The trainer does not report `metric_tag`.
        ObjectiveError: A bad objective or constraint, or a primary other than `metric_tag`.
    """
    metric_goal(metric_tag)
    metrics, _ = objective_rules.resolve(objectives, constraints, metric_tag)
    return study_spec_metrics(metrics), metrics[0].goal
