"""The simulator's controller sees key groups' loads as the Spark controller does: each
group's share of the declared keys of the streams its operator reads."""

from __future__ import annotations

import numpy as np

from controller.scenario import load_scenario
from controller.wiring import make_context
from core.workload import mean_key_group_shares
from tests.conftest import SCENARIOS


def test_key_group_loads_follow_the_declared_keys_through_a_chain() -> None:
    sc = load_scenario(SCENARIOS / "zipf-hotkey-shift.yaml")  # events -> parse -> count
    ctx = make_context(sc)
    ops = [o.id for o in sc.operators]
    count = ctx.units.coeff[ctx.units.op_index == ops.index("count")][:, 0]
    shares = mean_key_group_shares(sc.streams[0].keys, 50, sc.duration_s)
    assert np.allclose(count / count.sum(), shares)
    assert count.max() / count.min() > 2  # Zipf 1.3: uniform shares would fail here
    parse = ctx.units.coeff[ctx.units.op_index == ops.index("parse")][:, 0]
    assert parse.size == 1  # one key group: its whole stream
    total = sc.operators[1].cost_us / sc.operators[0].cost_us
    assert np.isclose(count.sum() / parse.sum(), total)  # shares only split, never add load


def test_every_param_a_method_reads_is_listed() -> None:
    """placement_params.PARAMS is what validation accepts: a name a method reads but the list
    lacks would be refused in every scenario that sets it."""
    import re

    from controller.placement_params import PARAMS
    from tests.conftest import ROOT

    read = set(
        re.findall(r"params\.get\(\"(\w+)\"", (ROOT / "controller/placements.py").read_text())
    )
    listed = {p for ps in PARAMS.values() for p in ps}
    assert read and read <= listed, read - listed
