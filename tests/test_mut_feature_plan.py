"""The features step's plan: the exact line the run log shows, and each depth a space proposes.

Written to kill mutmut's survivors in `pipelines/study/feature_plan.py` (docs/mutation.md).
"""

from __future__ import annotations

import dataclasses

import pytest

from pipelines.study import feature_plan
from tests.test_features_pipeline import LR, space
from trainer.models import MODELS

RESNET = MODELS["resnet50"]


def blocks(kind: str, **bounds) -> dict:
    return {"id": "trainable_blocks", "type": kind, **bounds}


@pytest.mark.parametrize(
    ("params", "cached", "line"),
    [
        (
            space(blocks("discrete", values=[0, 2, 5])),
            (0, 2),
            "caching resnet50's frozen prefix for trainable_blocks 0,2 (of 5 blocks); "
            "trainable_blocks 5 train from images",
        ),
        (
            space(blocks("discrete", values=[0, 1, 2])),
            (0, 1, 2),
            "caching resnet50's frozen prefix for trainable_blocks 0,1,2 (of 5 blocks)",
        ),
        (
            space(blocks("integer", min=0, max=2)),
            (0, 1, 2),
            "caching resnet50's frozen prefix for trainable_blocks 0,1,2 (of 5 blocks)",
        ),
        (
            space(LR),  # no trainable_blocks: resnet50's default trains all 5
            (),
            "nothing to cache: every trial trains all 5 blocks of resnet50 (trainable_blocks 5)",
        ),
        (
            space(blocks("discrete", values=[5, 6])),
            (),
            "nothing to cache: every trial trains all 5 blocks of resnet50 (trainable_blocks 5, 6)",
        ),
    ],
)
def test_the_plans_line_names_what_is_cached_and_what_trains_from_images(params, cached, line):
    plan = feature_plan.plan_features(RESNET, params, "auto")
    assert plan.trainable_blocks == cached
    assert plan.reason == line


def test_the_cache_off_line_is_whole():
    plan = feature_plan.plan_features(RESNET, space(blocks("discrete", values=[0])), "off")
    assert plan == feature_plan.FeaturePlan((), "feature_cache=off: every trial trains from images")


def test_a_backbone_of_one_block_caches_it_when_frozen():
    backbone = dataclasses.replace(RESNET.backbone, block_outputs=((32, 2048),))
    one = dataclasses.replace(RESNET, backbone=backbone)
    assert feature_plan.plan_features(one, space(blocks("discrete", values=[0, 1])), "auto") == (
        feature_plan.FeaturePlan(
            (0,),
            "caching resnet50's frozen prefix for trainable_blocks 0 (of 1 blocks); "
            "trainable_blocks 1 train from images",
        )
    )


def test_a_backbone_without_a_trainable_blocks_flag_has_nothing_to_propose():
    bare = dataclasses.replace(RESNET, hyperparameters=())
    plan = feature_plan.plan_features(bare, space(LR), "auto")
    assert plan.reason == (
        "nothing to cache: every trial trains all 5 blocks of resnet50 (trainable_blocks none)"
    )
