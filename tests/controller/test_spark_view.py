"""The Spark view of a scenario: the network the pipeline runs (one keyed stage over one
stream per path), which the calibrated simulator runs and the Spark controller plans with."""

from __future__ import annotations

import numpy as np

from controller.calibration import (
    CalibrationOverlay,
    Provenance,
    SimulatorOverlay,
    apply_overlay,
)
from controller.replay import replay_sim
from controller.scenario import ScenarioFile, load_scenario
from controller.spark_view import SparkView, spark_view
from controller.wiring import spark_context
from core.batch_model import BatchModel
from core.workload import rates
from spark_adapter.query import compile_query
from tests.conftest import SCENARIOS

RAMP = SCENARIOS / "spark-overload-ramp.yaml"


def test_the_view_is_the_pipelines_keyed_stage_and_the_controllers_network() -> None:
    sc = load_scenario(RAMP)
    q = compile_query(sc)
    view = spark_view(sc)
    assert isinstance(view, SparkView)
    net = view.network()
    assert list(net.streams) == list(q.sides) == ["s:parse->enrich", "s:parse->direct"]
    assert [o.id for o in net.operators] == ["count_k"]
    # each path at its own cost per row: parse + enrich + count, parse + direct + count
    assert np.allclose(net.cost_matrix()[0] * 1e6, [3200.0, 900.0])
    # the Spark controller's network is the same stage
    ctx_net = spark_context(sc, q, 2, 1.0).network
    assert ctx_net == net
    # each path's rows are copies of its input's: the same rates
    r, r0 = rates(view), rates(sc)
    assert np.array_equal(r[:, 0], r0[:, 0]) and np.array_equal(r[:, 1], r0[:, 0])


def test_a_scenario_that_is_one_keyed_operator_is_its_own_view() -> None:
    sc = load_scenario(SCENARIOS / "spark-anticorrelated.yaml")
    assert spark_view(sc) is sc


def test_a_bursty_streams_paths_burst_together() -> None:
    """Copies of one stream's rows follow one draw of its rate process, not one each."""
    sc = load_scenario(SCENARIOS / "spark-split-shed.yaml")
    bursty = {"kind": "bursty", "low": 3000, "high": 9000, "on_s": 6, "off_s": 9, "jitter": 0.5}
    s0 = type(sc.streams[0]).model_validate({**sc.streams[0].model_dump(), "rate": bursty})
    sc = sc.model_copy(update={"streams": [s0, *sc.streams[1:]]})
    view = spark_view(sc)
    r, r0 = rates(view), rates(sc)
    assert [x.id for x in view.streams] == ["s:parse->enrich", "s:parse->direct", "t"]
    assert np.array_equal(r[:, 0], r[:, 1]) and np.array_equal(r[:, 0], r0[:, 0])
    assert np.array_equal(r[:, 2], r0[:, 1])
    assert r[:, 0].std() > 0  # the draw is not constant, so equal columns are one draw


def _overlay(sc_name: str) -> CalibrationOverlay:
    return CalibrationOverlay(
        calibration=Provenance(
            scenario=sc_name,
            workdir="w",
            batches=10,
            measured_us_per_row=2000.0,
            modelled_us_per_row=2000.0,
            busy_fit_r2=1.0,
            batch_duration_p50_s=2.0,
            batch_duration_p99_s=2.5,
        ),
        simulator=SimulatorOverlay(
            rate_scale=0.1, batch_model=BatchModel(task_overhead_s=0.01, batch_overhead_s=0.5)
        ),
        operators={},
    )


def test_the_calibrated_simulator_spreads_a_stateless_operator_over_the_partitions() -> None:
    """On its own network the simulator puts the enrichment (2.4 of the 4.1 ms a row) on one
    node; on Spark it runs in every partition's fold. The calibrated replay runs the view: the
    busiest node carries about half the work at the peak, not the enrichment's share."""
    sc = load_scenario(RAMP)
    cal = apply_overlay(sc, _overlay(sc.name))
    assert isinstance(cal, SparkView)
    own = sc.model_copy(update={"simulator": cal.simulator, "cluster": cal.cluster})

    def busiest_share(s: ScenarioFile) -> float:
        load = replay_sim(s, shedding="none").series.node_load.to_numpy()
        peak = load.sum(axis=1).argmax()
        return float(load[peak].max() / load[peak].sum())

    assert busiest_share(cal) < 0.58 <= busiest_share(own)
