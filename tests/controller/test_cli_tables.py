"""Tables print whole where the user reads them: piped or redirected (a console that is not a
terminal is 80 columns), a wide table is not cut to an ellipsis; names and numbers appear in
full."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from controller.cli import app
from controller.cli.tables import _fmt
from tests.conftest import SCENARIOS

PLACEMENTS = "llf,random,correlation-oneway,correlation-twoway,correlation-selective,rod"


@pytest.fixture(autouse=True)
def _no_width_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # a width the user sets is kept (test_daemon)


def cells(output: str) -> dict[str, list[str]]:
    """A metrics-down-the-side table's rows: label -> its cells, one per column."""
    rows = [ln.split("│") for ln in output.splitlines() if ln.startswith("│")]
    return {r[1].strip(): [c.strip() for c in r[2:-1]] for r in rows}


def test_a_wide_compare_table_is_not_cut_when_piped() -> None:
    args = ["compare", str(SCENARIOS / "anticorrelated-diurnal.yaml"), "--seeds", "1"]
    r = CliRunner().invoke(app, [*args, "--placement", PLACEMENTS])
    assert r.exit_code == 0, r.output
    assert "…" not in r.output, r.output
    header = next(line for line in r.output.splitlines() if "metric" in line)
    assert all(p in header for p in PLACEMENTS.split(",")), header  # one line, each name whole
    rows = json.loads(CliRunner().invoke(app, [*args, "--placement", PLACEMENTS, "--json"]).output)
    got = cells(r.output)["node_load_variance_mean (cores²)"]
    assert got == [_fmt(x["node_load_variance_mean"]) for x in rows], got


def test_place_shows_the_node_mean_loads_it_names() -> None:
    args = ["place", str(SCENARIOS / "bursty-rod.yaml"), "--algorithm", "rod,llf,random"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0 and "…" not in r.output, r.output
    rows = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)
    table = cells(r.output)
    for key, agg in (("node_mean_load_max (cores)", max), ("node_mean_load_min (cores)", min)):
        assert table[key] == [_fmt(agg(x["node_mean_loads"])) for x in rows], (key, table[key])


def test_the_shed_table_keeps_every_location_when_piped() -> None:
    args = ["shed", str(SCENARIOS / "overload-ramp.yaml"), "--peak", "--method", "lp,uniform"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0 and "…" not in r.output, r.output
    rows = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)
    for x in rows:
        for loc in x["keep"]:
            assert f"{loc}=" in r.output, loc


def test_the_shed_table_names_the_time_its_rates_are_from() -> None:
    """Without --at or --peak the plans are for the start, where overload-ramp sheds nothing:
    the title says so, and the time is the tick's (the JSON's time_s), not the flag's."""
    sc = str(SCENARIOS / "overload-ramp.yaml")
    for flags, when in (
        ([], "the start"),
        (["--peak"], "the peak total rate"),
        (["--at", "37.5"], "--at 37.5"),
    ):
        args = ["shed", sc, "--method", "lp", *flags]
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 0, r.output
        (row,) = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)
        title = r.output.splitlines()[0].strip()
        assert title == f"shedding plans at {row['time_s']:g} s ({when})", r.output
    assert row["time_s"] <= 37.5


def test_runs_whose_figures_all_print_alike_are_named_under_the_table() -> None:
    """Three methods giving identical rows is a finding: on `zipf-moderate` (one unit per
    node, equal nodes) every placement is a relabelling of the same one, and the table says
    so under it; on `bursty-rod` the methods differ and nothing is said."""
    place = ["place", "--points", "1024", "--algorithm", "rod,llf,random"]
    tied = CliRunner().invoke(app, [*place[:1], str(SCENARIOS / "zipf-moderate.yaml"), *place[1:]])
    assert tied.exit_code == 0, tied.output
    assert "the same figures: rod = llf = random" in tied.output, tied.output
    apart = CliRunner().invoke(app, [*place[:1], str(SCENARIOS / "bursty-rod.yaml"), *place[1:]])
    assert apart.exit_code == 0, apart.output
    assert len(set(map(tuple, zip(*cells(apart.output).values(), strict=True)))) == 3
    assert "the same figures" not in apart.output, apart.output


def test_a_tie_of_correlation_methods_says_their_pair_wise_rounds_moved_nothing() -> None:
    """On `elastic-ramp` two-way's pair-wise rounds move units and one-way's and selective's
    none, so those two print the same figures: the table counts each method's pair-wise moves
    (from its decisions) and says why the two tie; two-way's own moves are counted apart from
    the global steps' (fewer than all its migrations)."""
    args = ["compare", str(SCENARIOS / "elastic-ramp.yaml"), "--placement"]
    args.append("correlation-oneway,correlation-twoway,correlation-selective")
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert (
        "the same figures: correlation-oneway = correlation-selective (their pair-wise rounds "
        "moved no unit, and they differ only there)"
    ) in said, r.output
    rows = {
        x["placement"]: x for x in json.loads(CliRunner().invoke(app, [*args, "--json"]).output)
    }
    assert (
        rows["correlation-oneway"]["pairwise_moves"]
        == 0
        == rows["correlation-selective"]["pairwise_moves"]
    )
    two = rows["correlation-twoway"]
    assert 0 < two["pairwise_moves"] < two["migrations"], two
    # the table's breakdown of the migrations by cause: two-way's pair-wise moves, the rest
    # its global step's and the trigger's; one-way's none
    table = cells(r.output)
    assert table["migrations: pairwise (moves)"][:2] == ["0", str(int(two["pairwise_moves"]))]
    for x in rows.values():
        assert sum(x["migrations_by_cause"].values()) == x["migrations"], x
    assert "pairwise_moves (moves)" not in table  # the same count, not printed twice


def test_place_runs_each_method_with_the_scenario_s_params() -> None:
    """The scenario's ``search_rounds: 0`` turns ROD's feasible-set search off: ``place``
    shows plain ROD (the greedy's own assignment, computed here), not the searched one it
    showed with the params ignored; ``seed`` reaches random; llf reads neither."""
    from controller.compare import place
    from controller.scenario import load_scenario
    from controller.wiring import make_context
    from placement.rod import rod

    sc = load_scenario(SCENARIOS / "bursty-rod.yaml")

    def with_params(params: dict) -> dict[str, dict]:
        pl = sc.controller.placement.model_copy(update={"params": params})
        rows = place(sc.with_controller(placement=pl), ["rod", "random", "llf"], 1024)
        return {r["algorithm"]: r for r in rows}

    default, off, seeded = (
        with_params({}),
        with_params({"search_rounds": 0}),
        with_params({"seed": 7}),
    )
    ctx = make_context(sc)
    plain = rod(ctx.units.coeff, ctx.cluster.capacities(), ctx.units.edges, seed=sc.seed)
    ids = [off["rod"]["assignment"][u] for u in ctx.units.ids]
    assert ids == [ctx.cluster.ids[int(n)] for n in plain]
    assert off["rod"]["feasible_set_ratio"] < default["rod"]["feasible_set_ratio"]
    assert seeded["random"]["assignment"] != default["random"]["assignment"]
    assert off["llf"] == default["llf"] == seeded["llf"]


def test_the_spark_compare_table_shows_the_means_of_runs_that_differ(capsys) -> None:  # type: ignore[no-untyped-def]
    """Two Spark runs of one method whose global steps moved different units (the measured
    loads differ from run to run): the row shows each cause's mean, as the other figures'
    (a list of the runs' dicts broke the table: "unhashable type: 'dict'")."""
    from controller.cli.compares import _show_compared
    from controller.spark_compare import mean_runs

    def run(order: int, p99: float, moved: dict[str, int]) -> dict:
        return {
            "master": "local[2]",
            "partitioner": "hash",
            "placement": "correlation-twoway",
            "batch_duration_p99": p99,
            "migrations": sum(moved.values()),
            "migrations_by_cause": moved,
            "pairwise_moves": moved.get("pairwise", 0),
            "output_matches_reference": True,
            "run_order": order,
        }

    two = mean_runs([run(2, 0.7, {"global-step": 6}), run(3, 0.9, {"global-step": 4})])
    one = mean_runs([run(1, 1.0, {}), run(4, 1.2, {})]) | {"placement": "llf"}
    rows = [one | {"seeds": 2}, two | {"seeds": 2}]
    _show_compared(rows, ha=False, shedding=False, spark=True)
    got = cells(capsys.readouterr().out)
    assert got["migrations: global-step (moves)"] == ["0", "5"]
    assert got["batch_duration_p99 (s)"] == ["1.1", "0.8"]
