"""The physical scenario: cluster, streams, query network, faults and simulator constants.

Scenario files are YAML (or JSON) validated by these pydantic models (``extra="forbid"``,
``schema_version: 1``). ``load_model`` turns any problem into a ``ScenarioError`` whose lines
each name the dotted field path, the message and the offending value. A file's ``controller:``
and ``expect:`` blocks are the controller's (``controller.scenario.ScenarioFile``); the
physical ``load_scenario`` leaves them out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import yaml
from pydantic import AfterValidator, Field, ValidationError, model_validator

from core.batch_model import BatchModel
from core.cluster import Cluster, Node
from core.files import read_text
from core.keyspace import KeySpec
from core.model_base import STRICT, Id, TrimtabModel
from core.rates import (
    RATE_KINDS,
    PiecewiseRate,
    RateSpec,
    TraceRate,
    read_rate_trace,
)
from core.topology import OperatorSpec, QueryNetwork, TopologyError
from core.yaml_text import load_yaml, yaml_problem

__all__ = [
    "MAX_KEY_GROUPS",
    "FaultSpec",
    "KeySpec",
    "NodeSpec",
    "OperatorModel",
    "Scenario",
    "ScenarioError",
    "StreamSpec",
    "load_model",
    "load_scenario",
]


# the most key groups a keyed operator has, and so the most partitions a keyed stage can use
MAX_KEY_GROUPS = 4096


class ScenarioError(ValueError):
    """An invalid scenario file. ``problems`` holds one line per error."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        n = len(problems)
        head = f"{path} is invalid ({n} problem{'s' if n != 1 else ''})"
        super().__init__(head + ": " + "; ".join(problems))


class NodeSpec(TrimtabModel):
    """A node: ``capacity`` in cores, ``latency_ms`` per hop."""

    model_config = STRICT
    id: Id
    capacity: float = Field(1.0, gt=0)
    latency_ms: float = Field(1.0, ge=0)


class ClusterSpec(TrimtabModel):
    """The nodes of the simulated (or steered) cluster."""

    model_config = STRICT
    nodes: list[NodeSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> ClusterSpec:
        ids = [n.id for n in self.nodes]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"duplicate node id {dup!r}")
        return self


class StreamSpec(TrimtabModel):
    """An input stream with its rate process and key space."""

    model_config = STRICT
    id: Id
    rate: RateSpec
    keys: KeySpec = Field(default_factory=KeySpec)


class WindowSpec(TrimtabModel):
    """A window of ``size_s`` seconds sliding every ``slide_s`` seconds."""

    model_config = STRICT
    size_s: float = Field(gt=0)
    slide_s: float = Field(gt=0)

    @model_validator(mode="after")
    def _whole_slides(self) -> WindowSpec:
        """A window is a whole number of slides: its state is kept in panes of one slide (a
        size of 7 s sliding by 2 s ran as 8 s windows, on Spark and in its reference alike)."""
        k = round(self.size_s / self.slide_s)
        if k < 1 or abs(self.size_s - k * self.slide_s) > 1e-9 * self.size_s:
            n = int(self.size_s // self.slide_s)
            fits = [m * self.slide_s for m in (n, n + 1) if m >= 1]
            raise ValueError(
                f"size_s: {self.size_s:g} is not a whole multiple of slide_s {self.slide_s:g} "
                "(a window's state is kept in panes of one slide); "
                f"size_s {' or '.join(f'{f:g}' for f in fits)} would be"
            )
        return self


def _no_key_group_mark(value: str) -> str:
    """``#`` names a keyed operator's key groups (``agg#3``): an operator called ``agg#0``
    and key group 0 of ``agg`` were one unit, and the replay stopped on a duplicate unit."""
    if "#" in value:
        raise ValueError("'#' names a keyed operator's key groups (agg#3); give another id")
    return value


class OperatorModel(TrimtabModel):
    """An operator of the query network (see ``core.topology.OperatorSpec``)."""

    model_config = STRICT
    id: Annotated[Id, AfterValidator(_no_key_group_mark)]
    kind: Literal["filter", "map", "udf", "aggregate", "join", "union", "sink"]
    inputs: list[str] = Field(min_length=1)
    cost_us: float = Field(ge=0)
    selectivity: float = Field(1.0, ge=0)
    key_groups: int = Field(1, ge=1, le=MAX_KEY_GROUPS)
    weight: float = Field(1.0, ge=0)
    window: WindowSpec | None = None
    state_bytes_per_key_group: float = Field(0.0, ge=0)
    # CPU microseconds to merge one partial result of a key whose window was computed in
    # several partitions (round-robin: every key; key splitting: the split hot keys). 0 for
    # vectorised count/sum merges; tens of microseconds for a Python-level merge per partial.
    merge_cost_us: float = Field(0.0, ge=0)
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _fits_its_kind(self) -> OperatorModel:
        if self.merge_cost_us > 0 and self.kind not in ("aggregate", "join"):
            raise ValueError(
                f"merge_cost_us: operator {self.id!r} is a {self.kind}; only keyed operators "
                "(aggregate, join) merge partial results"
            )
        again = [s for i, s in enumerate(self.inputs) if s in self.inputs[:i]]
        if again and self.kind != "join":  # the simulator read it twice, Spark once
            raise ValueError(
                f"inputs: {again[0]!r} is named twice; an operator reads each input once "
                "(only a join's two sides may be one stream, a self-join)"
            )
        if self.kind == "filter" and self.selectivity > 1:  # 9 for 0.9 made 9 rows of one
            raise ValueError(
                f"selectivity: a filter passes at most every row it reads, so at most 1 "
                f"(got {self.selectivity:g})"
            )
        return self


class FaultSpec(TrimtabModel):
    """A fault at ``at_s``: kill (restarts after ``duration_s``), lose (permanent), slow,
    partition (a node unreachable, or with ``stream`` an input stream unreachable: its tuples
    are held at the source and delivered when it heals), restore."""

    model_config = STRICT
    at_s: float = Field(ge=0)
    kind: Literal["kill", "lose", "slow", "partition", "restore"]
    node: str | None = None
    stream: str | None = Field(None, description="partition: the unreachable input stream")
    duration_s: float | None = Field(None, gt=0)
    factor: float = Field(1.0, ge=1)

    @model_validator(mode="after")
    def _needs(self) -> FaultSpec:
        if self.kind == "slow" and self.factor <= 1:
            raise ValueError("factor: a slow fault needs factor > 1")
        if self.stream is not None and self.kind != "partition":
            raise ValueError(f"stream: only a partition fault names a stream, not {self.kind}")
        if (self.node is None) == (self.stream is None) and self.kind == "partition":
            raise ValueError("node, stream: a partition fault names a node or a stream")
        if self.node is None and self.kind != "partition":
            raise ValueError(f"node: a {self.kind} fault needs a node")
        if self.factor != 1.0 and self.kind != "slow":  # by value: a dump sets every field
            raise ValueError(f"factor: only a slow fault has one (a {self.kind} fault ignored it)")
        if self.duration_s is not None and self.kind in ("lose", "restore"):
            what = "is permanent" if self.kind == "lose" else "acts at once"
            raise ValueError(
                f"duration_s: a {self.kind} fault {what} and ignored it (a kill heals after "
                "duration_s)"
            )
        return self


class SimulatorSettings(TrimtabModel):
    """Simulator constants: migration cost model, HA overheads, the rate scale and the
    micro-batch model a calibration sets."""

    model_config = STRICT
    rate_scale: float = Field(
        1.0,
        gt=0,
        description="run at this multiple of the streams' rates (calibration: the Spark run's scale)",
    )
    batch_model: BatchModel | None = Field(
        None, description="predict micro-batch durations (set by trimtab calibrate)"
    )
    node_startup_s: float = Field(
        10.0, ge=0, description="seconds a node that joins (scale out) takes before it serves"
    )
    migration_base_s: float = Field(0.5, ge=0)
    migration_s_per_mb: float = Field(0.05, ge=0)
    detection_s: float = Field(
        3.0, ge=0, description="heartbeat timeout before a failure is acted on"
    )
    checkpoint_s_per_mb: float = Field(
        0.02, ge=0, description="CPU seconds to checkpoint one MB of state"
    )
    restore_s_per_mb: float = Field(
        0.01, ge=0, description="CPU seconds to restore one MB of state"
    )
    ack_cost_us: float = Field(
        1.0,
        ge=0,
        description="upstream backup: CPU microseconds to keep one tuple at its producer until "
        "it is acknowledged, and to acknowledge it",
    )
    sink_dedup: bool = Field(
        True,
        description="the sink drops output a recovery sends again that it already holds, by "
        "sequence number (precise recovery); false: it is delivered twice (rollback recovery)",
    )


class Scenario(TrimtabModel):
    """A replayable scenario."""

    model_config = STRICT
    schema_version: Literal[1] = 1
    name: str
    description: str = ""
    seed: int = Field(0, ge=0, description="workload randomness (bursty jitter, random walks)")
    duration_s: float = Field(600.0, gt=0)
    tick_s: float = Field(1.0, gt=0)
    cluster: ClusterSpec
    streams: list[StreamSpec] = Field(min_length=1)
    operators: list[OperatorModel] = Field(min_length=1)
    faults: list[FaultSpec] = Field(default_factory=list)
    simulator: SimulatorSettings = Field(default_factory=SimulatorSettings)
    base_dir: str = Field(".", exclude=True)

    OTHER_LAYERS: ClassVar[tuple[str, ...]] = ("controller", "expect")
    """Blocks of a scenario file that belong to the controller (``controller.scenario``)."""

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        if self.duration_s < self.tick_s:
            raise ValueError(
                f"duration_s: {self.duration_s} is shorter than one tick (tick_s {self.tick_s})"
            )
        nodes = {n.id for n in self.cluster.nodes}
        for i, st in enumerate(self.streams):
            pieces = st.rate.pieces if isinstance(st.rate, PiecewiseRate) else []
            late = [
                (f"streams.{i}.keys.shifts.{j}.at_s", sh.at_s)
                for j, sh in enumerate(st.keys.shifts)
            ] + [(f"streams.{i}.rate.pieces.{j}.from_s", p.from_s) for j, p in enumerate(pieces)]
            for where, t in late:
                if t >= self.duration_s:
                    raise ValueError(
                        f"{where}: {t} is past the scenario's end (duration_s {self.duration_s})"
                    )
            for rate in [st.rate, *(p.rate for p in pieces)]:
                if isinstance(rate, TraceRate):
                    try:
                        read_rate_trace(Path(self.base_dir) / rate.path)
                    except ValueError as e:
                        raise ValueError(f"streams.{i}.rate.path: {e}") from None
        streams = {s.id for s in self.streams}
        for i, f in enumerate(self.faults):
            if f.at_s >= self.duration_s:
                raise ValueError(
                    f"faults.{i}.at_s: {f.at_s} is past the scenario's end (duration_s "
                    f"{self.duration_s}): the fault would never happen"
                )
            if f.node is not None and f.node not in nodes:
                raise ValueError(f"faults.{i}.node: unknown node {f.node!r}")
            if f.stream is not None and f.stream not in streams:
                raise ValueError(f"faults.{i}.stream: unknown stream {f.stream!r}")
        try:
            self.network()
        except TopologyError as e:
            raise ValueError(str(e)) from None
        read = {s for o in self.operators for s in o.inputs}
        for i, st in enumerate(self.streams):  # counted as input, it reached no output
            if st.id not in read:
                raise ValueError(
                    f"streams.{i}: {st.id!r} is read by no operator; name it in an "
                    "operator's inputs or remove it"
                )
        for i, o in enumerate(self.operators):  # shedding weighs the query outputs alone
            if o.weight != 1.0 and o.id in read:  # by value: a dumped model sets every field
                raise ValueError(
                    f"operators.{i}.weight: {o.id!r} feeds other operators, and only a query "
                    "output's weight counts (an operator no other reads)"
                )
        return self

    def drift_times(self) -> list[float]:
        """When the workload changes by design: the later pieces of piecewise rates, and the
        faults, in time order (the points a replay measures adaptation at)."""
        times = {
            p.from_s
            for st in self.streams
            if isinstance(st.rate, PiecewiseRate)
            for p in st.rate.pieces[1:]
        }
        times |= {f.at_s for f in self.faults}
        return sorted(t for t in times if t < self.duration_s)

    def input_outages(self) -> list[tuple[str, int, int]]:
        """Input streams unreachable (``partition`` faults naming a stream), in ticks:
        (stream, first tick, end tick exclusive; 30 s when the fault gives no duration)."""
        out = []
        for f in self.faults:
            if f.kind == "partition" and f.stream is not None:
                start = round(f.at_s / self.tick_s)
                end = start + max(1, round((f.duration_s or 30.0) / self.tick_s))
                out.append((f.stream, start, end))
        return out

    def rate_sources(self) -> list[int]:
        """For each stream, the stream whose rate process it follows (itself here; the
        streams of a split's paths follow their input stream, ``controller.spark_view``)."""
        return list(range(len(self.streams)))

    @property
    def ticks(self) -> int:
        """Number of ticks in the scenario."""
        return max(1, round(self.duration_s / self.tick_s))

    def network(self) -> QueryNetwork:
        """The query network as a ``QueryNetwork``."""
        return QueryNetwork(
            tuple(s.id for s in self.streams),
            tuple(
                OperatorSpec(
                    id=o.id,
                    kind=o.kind,
                    inputs=tuple(o.inputs),
                    cost_us=o.cost_us,
                    selectivity=o.selectivity,
                    key_groups=o.key_groups,
                    weight=o.weight,
                    state_bytes_per_key_group=o.state_bytes_per_key_group,
                )
                for o in self.operators
            ),
        )

    def cluster_model(self) -> Cluster:
        """The cluster as a ``Cluster``."""
        return Cluster(tuple(Node(n.id, n.capacity, n.latency_ms) for n in self.cluster.nodes))


def _format_loc(loc: tuple[Any, ...]) -> str:
    # Drop the discriminator tags pydantic inserts for tagged unions (e.g. "sine").
    parts = [str(p) for p in loc if not (isinstance(p, str) and p in _RATE_TAGS)]
    return ".".join(parts) or "(root)"


_RATE_TAGS = set(RATE_KINDS)


def format_validation_error(err: ValidationError) -> list[str]:
    """One line per error: ``dotted.path: message (got value)``; a check of our own that was
    handed a list or mapping names the bad value itself, so its line ends at the message."""
    lines = []
    for e in err.errors():
        got = e.get("input")
        shown = repr(got) if not isinstance(got, dict | list) or not got else type(got).__name__
        msg = str(e["msg"])
        ours, msg = msg.startswith("Value error, "), msg.removeprefix("Value error, ")
        loc = _format_loc(tuple(e["loc"]))
        if loc == "(root)" and ": " in msg:  # model-level checks name their own field path
            lines.append(msg)
        elif ours and isinstance(got, dict) and msg.split(": ", 1)[0].split(".")[0] in got:
            lines.append(f"{loc}.{msg}")  # a check of the mapping that names a key (or a path)
        elif ours and isinstance(got, dict | list):
            lines.append(f"{loc}: {msg}")
        else:
            lines.append(f"{loc}: {msg} (got {shown})")
    return lines


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None) -> Scenario:
    """The physical scenario of a scenario file; its controller blocks are left to the
    controller (``controller.scenario.load_scenario`` reads the whole file)."""
    return load_model(path, Scenario, overrides)


M = TypeVar("M", bound=Scenario)


def load_model(path: str | Path, model: type[M], overrides: dict[str, Any] | None = None) -> M:
    """Read and validate a scenario file (YAML or JSON) as ``model``.

    Raises
    ------
    ScenarioError
        when the file is missing, unparsable, or invalid; each problem names its field.
    """
    p = Path(path)
    text, problem = read_text(p)
    if problem is not None:
        raise ScenarioError(str(p), [problem])
    try:
        data = load_yaml(text or "")
    except yaml.YAMLError as e:
        raise ScenarioError(str(p), [f"not valid YAML: {yaml_problem(e)}"]) from None
    if not isinstance(data, dict):
        raise ScenarioError(str(p), ["(root): expected a mapping of scenario fields"])
    for key, value in (overrides or {}).items():
        data[key] = value
    data["base_dir"] = str(p.parent)
    for key in model.OTHER_LAYERS:
        if key not in model.model_fields:
            data.pop(key, None)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ScenarioError(str(p), format_validation_error(e)) from None
