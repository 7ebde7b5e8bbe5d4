"""Which frozen depths a study's features step caches: the model, its search space, `feature_cache`.

A trial with `trainable_blocks=t` on a backbone of `blocks` blocks freezes its first
`blocks - t` blocks; their outputs are a pure function of the image, so the features step
computes them once per study for every such `t` the study can propose. Not cached: a model
that declares no block boundaries (`ModelSpec.blocks == 0`: the CNN, a team's builder),
`t == blocks` (nothing is frozen) — the trainer's own rule, `trainer.feature_keys.is_cacheable`
— and everything under `feature_cache=off`. At most
`MAX_CACHED_DEPTHS` values are cached: the smallest `t` (the deepest frozen prefixes, whose
trials skip the most arithmetic and whose features are the smallest); the rest train from
images, as every trial does with the cache off. A study whose search space chooses the model
(`model_choice`) gets a plan for each model a trial can pick, from that model's own
parameters (`plans_for_study`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from pipelines.study.model_choice import MODEL_PARAMETER
from pipelines.study.search_space import Parameter, Value
from trainer.feature_keys import is_cacheable
from trainer.models import MODELS, ModelSpec

TRAINABLE_BLOCKS = "trainable_blocks"  # the models' own hyperparameter (trainer/models)
MAX_CACHED_DEPTHS = 3  # a range 0..13 would otherwise cache 13 depths of MobileNetV3Small


@dataclasses.dataclass(frozen=True)
class FeaturePlan:
    """What the features step computes, and why, in one line.

    Attributes:
        trainable_blocks: The `trainable_blocks` values whose frozen prefix is cached,
            ascending; empty: the step has nothing to do.
        reason: One line for the run log: what is cached, or why nothing is.
    """

    trainable_blocks: tuple[int, ...]
    reason: str

    @property
    def flag_value(self) -> str:
        """The entrypoint's `--trainable_blocks` value: `0,2`; empty when nothing is cached."""
        return ",".join(str(t) for t in self.trainable_blocks)


def _find(parameters: Iterable[Parameter], name: str) -> Parameter | None:
    """The parameter `name`, conditional children included."""
    for p in parameters:
        if p.parameter_id == name:
            return p
        found = _find(p.conditional, name)
        if found is not None:
            return found
    return None


def proposed_values(spec: ModelSpec, parameters: Sequence[Parameter]) -> tuple[int, ...]:
    """Every `trainable_blocks` value the study can propose (absent: the model's default)."""
    p = _find(parameters, TRAINABLE_BLOCKS)
    if p is None:
        default = {h.name: h.default for h in spec.hyperparameters}.get(TRAINABLE_BLOCKS)
        return () if default is None else (int(default),)
    if p.type == "integer":
        return tuple(range(int(p.min or 0), int(p.max or 0) + 1))
    return tuple(sorted({int(float(v)) for v in p.values}))


def plan_features(
    spec: ModelSpec | None, parameters: Sequence[Parameter], feature_cache: str
) -> FeaturePlan:
    """The `trainable_blocks` values to cache for a study of `spec` over `parameters`.

    `spec` is None for a model the pipeline does not know by name (a team's builder).
    """
    if feature_cache == "off":
        return FeaturePlan((), "feature_cache=off: every trial trains from images")
    if spec is None or spec.blocks <= 0:
        name = spec.name if spec else "a team's builder"
        return FeaturePlan((), f"nothing to cache: {name} declares no frozen backbone blocks")
    values = proposed_values(spec, parameters)
    frozen = sorted(t for t in values if is_cacheable(spec.blocks, t))
    if not frozen:
        shown = ", ".join(map(str, values)) or "none"
        return FeaturePlan(
            (),
            f"nothing to cache: every trial trains all {spec.blocks} blocks of {spec.name} "
            f"(trainable_blocks {shown})",
        )
    kept = tuple(frozen[:MAX_CACHED_DEPTHS])
    line = (
        f"caching {spec.name}'s frozen prefix for trainable_blocks "
        f"{','.join(map(str, kept))} (of {spec.blocks} blocks)"
    )
    uncached = [t for t in values if t not in kept]
    if uncached:
        line += f"; trainable_blocks {','.join(map(str, uncached))} train from images"
    if len(frozen) > MAX_CACHED_DEPTHS:
        line += f" (at most {MAX_CACHED_DEPTHS} depths are cached)"
    return FeaturePlan(kept, line)


def plan_for_model(model: str, parameters: Sequence[Parameter], feature_cache: str) -> FeaturePlan:
    """`plan_features` for the `model` setting (a registered name or a team's reference)."""
    return plan_features(MODELS.get(model), parameters, feature_cache)


def plans_for_study(
    model: str, parameters: Sequence[Parameter], feature_cache: str
) -> tuple[tuple[str, FeaturePlan], ...]:
    """`(model, plan)` for each model a trial of the study can be.

    The `model` setting's alone, or, when the space chooses the model, each model of the
    choice with the parameters a trial of it gets (its conditional children only).
    """
    choice = next((p for p in parameters if p.parameter_id == MODEL_PARAMETER), None)
    if choice is None:
        return ((model, plan_for_model(model, parameters, feature_cache)),)
    shared = [p for p in parameters if p is not choice]

    def own(m: Value) -> list[Parameter]:  # what a trial of model `m` gets
        children = (dataclasses.replace(c, parent_values=()) for c in choice.active_children(m))
        return [*shared, *children]

    return tuple((str(m), plan_for_model(str(m), own(m), feature_cache)) for m in choice.values)


def blocks_text(plans: Sequence[tuple[str, FeaturePlan]]) -> str:
    """What the step caches, for its record: `0,2` (one model), `resnet50:0,2 …` (a choice)."""
    cached = [(m, p) for m, p in plans if p.trainable_blocks]
    if len(plans) == 1:
        return cached[0][1].flag_value if cached else ""
    return " ".join(f"{m}:{p.flag_value}" for m, p in cached)
