"""Periodic key popularity by class (``keys.waves``): anti-phased key groups."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from core.hashing import stable_mod
from core.keyspace import KeySpec
from core.workload import key_epochs, key_group_shares

WAVES = {"classes": 2, "period_s": 40, "depth": 0.8, "step_s": 4}


def test_key_groups_of_one_class_swing_together_and_against_the_other() -> None:
    spec = KeySpec(space=4000, distribution="zipf", s=0.6, waves=WAVES)
    ep = key_epochs(spec, until_s=80)
    assert ep.starts_s.tolist() == [4.0 * i for i in range(20)]
    shares = np.stack([key_group_shares(ep.probs_at(t), 16) for t in ep.starts_s])  # (20, 16)
    assert np.allclose(shares.sum(axis=1), 1.0)
    cls = np.arange(16) % 2  # 2 divides 16: a key group's keys share its class
    c0, c1 = shares[:, cls == 0].sum(axis=1), shares[:, cls == 1].sum(axis=1)
    assert np.corrcoef(c0, c1)[0, 1] < -0.99
    assert c0.max() > 0.85 and c0.min() < 0.15  # 0.5 x (1 +- 0.8 cos): near 0.9 and 0.1
    within = np.corrcoef(shares[:, cls == 0].T)
    assert within.min() > 0.99  # groups of one class move together
    np.testing.assert_allclose(ep.probs_at(13.0), ep.probs_at(53.0))  # periodic
    np.testing.assert_allclose(ep.probs_at(1000.0), ep.probs_at(1000.0 - 40 * 20))  # past until_s


def test_a_key_group_holds_one_class_only_when_classes_divide_the_groups() -> None:
    keys = np.arange(5000)
    cls, kg = stable_mod(keys, 2, 0), stable_mod(keys, 16, 0)
    assert all(np.unique(cls[kg == g]).size == 1 for g in range(16))
    kg5 = stable_mod(keys, 5, 0)
    assert any(np.unique(cls[kg5 == g]).size == 2 for g in range(5))


def test_without_depth_or_waves_the_distribution_is_the_base_one() -> None:
    base = key_epochs(KeySpec(space=100, distribution="zipf", s=1.0))
    flat = key_epochs(
        KeySpec(space=100, distribution="zipf", s=1.0, waves={**WAVES, "depth": 0.0}), 40
    )
    for t in (0.0, 7.0, 22.0):
        np.testing.assert_allclose(flat.probs_at(t), base.probs_at(t))
    assert base.starts_s.tolist() == [0.0]


@pytest.mark.parametrize(
    ("waves", "field"),
    [
        ({"classes": 1, "period_s": 10}, "classes"),
        ({"classes": 2, "period_s": 0}, "period_s"),
        ({"classes": 2, "period_s": 10, "depth": 1.5}, "depth"),
        ({"classes": 2, "period_s": 10, "phase": 3}, "phase"),
    ],
)
def test_bad_waves_name_the_field(waves: dict, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        KeySpec(space=10, waves=waves)
