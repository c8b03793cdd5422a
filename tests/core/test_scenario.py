from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from controller.scenario import load_scenario
from core.scenario import ScenarioError
from core.workload import key_epochs, key_group_shares, rates, sample_keys
from tests.conftest import ROOT, SCENARIOS

BASE = {
    "name": "t",
    "duration_s": 20,
    "cluster": {"nodes": [{"id": "a"}, {"id": "b"}]},
    "streams": [{"id": "s", "rate": {"kind": "constant", "rate": 10}}],
    "operators": [{"id": "o", "kind": "map", "inputs": ["s"], "cost_us": 100}],
}


def write(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "sc.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_all_shipped_scenarios_validate() -> None:
    files = sorted(SCENARIOS.glob("*.yaml"))
    assert len(files) >= 9
    for f in files:
        sc = load_scenario(f)
        # and again from a dump, which writes every field (the suite and the benches rebuild
        # scenarios so): a check that reads "was it written?" refused a default-valued weight
        # and a kill fault's default factor there
        type(sc).model_validate(sc.model_dump() | {"base_dir": sc.base_dir})


def with_(path: str, value: object) -> dict:
    import copy

    d = copy.deepcopy(BASE)
    cur = d
    keys = path.split(".")
    for k in keys[:-1]:
        cur = cur[int(k)] if k.isdigit() else cur[k]
    last = keys[-1]
    if value is KeyError:
        del cur[last]
    else:
        cur[int(last) if last.isdigit() else last] = value
    return d


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("cluster.nodes.0.capacity", -1, "cluster.nodes.0.capacity"),
        ("streams.0.rate", {"kind": "sine", "base": 1}, "streams.0.rate.amplitude"),
        ("streams.0.rate", {"kind": "warp"}, "streams.0.rate"),
        ("operators.0.kind", "teleport", "operators.0.kind"),
        ("operators.0.inputs", ["nope"], "unknown input 'nope'"),
        ("operators.0.cost_us", KeyError, "operators.0.cost_us"),
        ("name", KeyError, "name"),
        ("bogus", 1, "bogus"),
        ("faults", [{"at_s": 1, "kind": "kill", "node": "zz"}], "faults.0.node"),
        ("faults", [{"at_s": -1, "kind": "kill", "node": "a"}], "faults.0.at_s"),
        ("faults", [{"at_s": 1, "kind": "slow", "node": "a"}], "factor"),
        ("streams.0.keys", {"distribution": "pareto"}, "streams.0.keys.distribution"),
        ("controller", {"interval_s": 0}, "controller.interval_s"),
        ("schema_version", 2, "schema_version"),
        ("operators.0.merge_cost_us", 5, "merge_cost_us"),  # a map merges no partials
        ("operators.0.merge_cost_us", -1, "operators.0.merge_cost_us"),
        # ids: a blank one, a newline from a YAML block scalar (it broke one-line reasons),
        # and '#', which names key groups: an operator 'agg#0' beside a keyed 'agg' passed
        # validate and stopped the replay with pydantic's "duplicate unit id" dump
        ("cluster.nodes.0.id", " ", "cluster.nodes.0.id: an id must not be blank"),
        ("streams.0.id", "", "streams.0.id: an id must not be blank"),
        ("operators.0.id", "o\nb", "operators.0.id: holds a control character (U+000A)"),
        ("operators.0.id", "o#0", "operators.0.id: '#' names a keyed operator's key groups"),
        # the simulator read a repeated input twice (twice the load), Spark's union once
        ("operators.0.inputs", ["s", "s"], "operators.0.inputs: 's' is named twice"),
        # a stream no operator read counted as input and reached no output: it raised the
        # throughput (0.57 to 0.74) and the dropped fraction of seed-shedding-2node
        (
            "streams",
            [{"id": i, "rate": {"kind": "constant", "rate": 1}} for i in ("s", "x")],
            "streams.1: 'x' is read by no operator",
        ),
    ],
)
def test_validation_errors_name_the_field(
    tmp_path: Path, path: str, value: object, expected: str
) -> None:
    with pytest.raises(ScenarioError) as ei:
        load_scenario(write(tmp_path, with_(path, value)))
    assert expected in str(ei.value)


def test_a_self_join_may_name_its_stream_twice(tmp_path: Path) -> None:
    join = {"id": "j", "kind": "join", "inputs": ["s", "s"], "cost_us": 10}
    join["window"] = {"size_s": 2, "slide_s": 1}
    sc = load_scenario(write(tmp_path, with_("operators.0", join)))
    assert sc.operators[0].inputs == ["s", "s"]


def test_missing_and_unparsable_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="file not found"):
        load_scenario(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(bad)
    bad.write_text("- a list")
    with pytest.raises(ScenarioError, match="mapping"):
        load_scenario(bad)


def test_a_scenario_saved_as_utf16_loads_as_the_plain_file(tmp_path: Path) -> None:
    """Windows PowerShell's ``>`` writes UTF-16 with a byte-order mark: such a scenario was
    "not a UTF-8 text file (byte 0 is not UTF-8)". It loads as the UTF-8 file, and a UTF-16
    file that does not decode is named as UTF-16."""
    plain = SCENARIOS / "overload-ramp.yaml"
    (wide := tmp_path / "wide.yaml").write_bytes(plain.read_text().encode("utf-16"))
    assert load_scenario(wide).model_dump() == load_scenario(plain).model_dump()
    (broken := tmp_path / "broken.yaml").write_bytes(b"\xff\xfen\x00a")
    with pytest.raises(ScenarioError, match=r"not a UTF-16 text file \(byte 4 is not UTF-16\)"):
        load_scenario(broken)


def test_cli_exits_nonzero_with_one_line(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).parent / "trimtab")
    p = write(tmp_path, with_("cluster.nodes.0.capacity", -1))
    r = subprocess.run([exe, "replay", str(p), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "cluster.nodes.0.capacity" in lines[0]
    r = subprocess.run(
        [exe, "replay", str(tmp_path / "missing.yaml")], capture_output=True, text=True
    )
    assert (
        r.returncode == 2 and "missing.yaml" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    )


def test_rate_processes(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("t_s,rate\n0,10\n10,30\n")
    d = dict(
        BASE,
        streams=[
            {"id": "c", "rate": {"kind": "constant", "rate": 5}},
            {"id": "st", "rate": {"kind": "step", "rate": 1, "steps": [[5, 9]]}},
            {"id": "si", "rate": {"kind": "sine", "base": 10, "amplitude": 20, "period_s": 8}},
            {"id": "b", "rate": {"kind": "bursty", "low": 1, "high": 7, "on_s": 2, "off_s": 3}},
            {
                "id": "w",
                "rate": {"kind": "random_walk", "start": 5, "sigma": 3, "low": 0, "high": 10},
            },
            {"id": "r", "rate": {"kind": "ramp", "start": 0, "end": 10, "from_s": 0, "to_s": 10}},
            {"id": "t", "rate": {"kind": "trace", "path": "trace.csv"}},
        ],
        operators=[
            {"id": "o", "kind": "union", "inputs": ["c", "st", "si", "b", "w", "r", "t"]}
            | {"cost_us": 100}
        ],
    )
    sc = load_scenario(write(tmp_path, d))
    r = rates(sc)
    assert r.shape == (20, 7)
    assert np.all(r[:, 0] == 5)
    assert r[4, 1] == 1 and r[5, 1] == 9
    assert r[:, 2].min() == 0  # clipped at zero
    assert set(np.unique(r[:, 3])) <= {1.0, 7.0}
    assert r[:, 4].min() >= 0 and r[:, 4].max() <= 10
    assert r[5, 5] == pytest.approx(5)
    assert r[5, 6] == pytest.approx(20) and r[15, 6] == pytest.approx(30)
    np.testing.assert_array_equal(r, rates(sc))  # deterministic by seed


def test_a_rate_trace_saved_by_a_spreadsheet_reads_as_the_plain_file(tmp_path: Path) -> None:
    """A spreadsheet's "CSV UTF-8" starts with a byte-order mark and ends lines with CRLF: its
    header read as '\ufefft_s,rate' and the trace was refused; so was UTF-16 (PowerShell's
    ``>``). Text that is not UTF-8 is named as such, with the file."""
    from core.rates import read_rate_trace

    plain, sheet, latin = tmp_path / "plain.csv", tmp_path / "sheet.csv", tmp_path / "latin.csv"
    plain.write_text("t_s,rate\n0,10\n10,30\n")
    sheet.write_bytes(b"\xef\xbb\xbft_s,rate\r\n0,10\r\n10,30\r\n")
    latin.write_bytes(b"t_s,rate\n0,10\n10,30 \xe9\n")
    (wide := tmp_path / "wide.csv").write_bytes("t_s,rate\r\n0,10\r\n10,30\r\n".encode("utf-16"))
    for saved in (sheet, wide):
        for got, want in zip(read_rate_trace(saved), read_rate_trace(plain), strict=True):
            np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match=r"latin.csv: not UTF-8 text \(invalid continuation"):
        read_rate_trace(latin)


def test_hot_key_shift_rotates_the_hot_set() -> None:
    from core.keyspace import KeySpec

    ep = key_epochs(
        KeySpec(space=100, distribution="zipf", s=1.5, shifts=[{"at_s": 10, "rotate": 7}])
    )
    assert ep.epoch_at(np.array([0.0, 9.9, 10.0])).tolist() == [0, 0, 1]
    assert int(np.argmax(ep.probs[0])) == 0 and int(np.argmax(ep.probs[1])) == 7
    shares = key_group_shares(ep.probs[0], 4)
    assert shares.sum() == pytest.approx(1.0)
    keys = sample_keys(ep.probs[0], 20000, np.random.default_rng(0))
    assert np.bincount(keys).argmax() == 0 and keys.max() < 100
