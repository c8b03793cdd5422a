"""A replay's memory is estimated before anything is allocated, and the estimate covers what
the simulator really records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from controller.scenario import load_scenario
from core.footprint import values_per_tick
from core.scenario import ScenarioError
from simulator import Simulator
from tests.conftest import SCENARIOS


@pytest.mark.parametrize("name", ["zipf-hotkey-shift", "anticorrelated-diurnal"])
def test_the_estimate_covers_every_per_tick_record(name: str) -> None:
    """Every array the simulator sizes by the scenario's ticks is counted: a record added
    without the estimate growing makes this fail."""
    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    sim = Simulator(sc, 0)
    arrays = [*vars(sim).values(), *sim.rec.values()]
    per_tick = [a for a in arrays if isinstance(a, np.ndarray) and a.ndim and a.shape[0] == sim.T]
    held = sum(a.nbytes for a in per_tick)
    bound = values_per_tick(sim.n, sim.m, sim.d) * 8 * sim.T
    assert held <= bound, (held, bound)
    assert held >= 0.6 * bound, (held, bound)  # and not a loose bound that would refuse early


def test_a_scenario_too_long_for_this_machine_is_refused_naming_duration(tmp_path: Path) -> None:
    d = yaml.safe_load((SCENARIOS / "seed-shedding-2node.yaml").read_text())
    d["duration_s"] = 1e9  # its rates alone filled 19 GB within 15 s
    f = tmp_path / "long.yaml"
    f.write_text(yaml.safe_dump(d))
    with pytest.raises(ScenarioError) as e:
        load_scenario(f)
    assert e.value.problems[0].startswith("duration_s: 1e+09 s at tick_s 1.0 is 1,000,000,000")
    d["duration_s"], d["tick_s"] = 1e9, 1e4  # the same span in coarser ticks fits
    del d["controller"]["interval_s"]  # the default: a round on every tick
    f.write_text(yaml.safe_dump(d))
    assert load_scenario(f).ticks == 100_000


def test_a_key_space_too_large_to_model_is_refused_by_name(tmp_path: Path) -> None:
    d = yaml.safe_load((SCENARIOS / "zipf-moderate.yaml").read_text())
    d["streams"][0]["keys"]["space"] = 10**9  # its probabilities filled the machine's 24 GB
    f = tmp_path / "keys.yaml"
    f.write_text(yaml.safe_dump(d))
    with pytest.raises(ScenarioError) as e:
        load_scenario(f)
    assert e.value.problems[0].startswith("streams.0.keys.space: 1,000,000,000 keys at 64 bytes")
    d["streams"][0]["keys"]["space"] = 10**6
    f.write_text(yaml.safe_dump(d))
    assert load_scenario(f).streams[0].keys.space == 10**6


def test_a_cluster_too_large_for_its_pair_statistics_is_refused(tmp_path: Path) -> None:
    d = yaml.safe_load((SCENARIOS / "anticorrelated-diurnal.yaml").read_text())
    d["cluster"]["nodes"] = [{"id": f"n{i}", "capacity": 1.0} for i in range(20_000)]
    f = tmp_path / "wide.json"  # JSON is YAML, and quicker to read at this size
    f.write_text(json.dumps(d))  # 50,000 nodes' pair correlations filled the machine's 24 GB
    with pytest.raises(ScenarioError) as e:
        load_scenario(f)
    assert e.value.problems[0].startswith("cluster.nodes: 20,000 nodes, whose pairs'")
    d["cluster"]["nodes"] = d["cluster"]["nodes"][:1000]  # the scale the global step is built for
    f.write_text(json.dumps(d))
    assert len(load_scenario(f).cluster.nodes) == 1000
