"""Daemon settings: a YAML file plus ``TRIMTAB_...`` environment variables, validated at start.

The ``placement``, ``shedding``, ``scaling`` and ``availability`` blocks are the controller's own settings
models (``controller.settings``), the same a scenario's ``controller:`` block holds; what a
config sets overrides the steered scenario's values, the rest keeps them.

Priority: init arguments > environment (``TRIMTAB_CONTROL__INTERVAL_S=5``) > YAML file >
defaults. Units are in the key names. Every host must be a loopback address. A bad key or
value raises ``ConfigError`` with one line per problem naming the dotted key and the value;
the CLI prints them and exits 2.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from controller.placement_params import method_problem
from controller.settings import (
    ControllerSettings,
    HASettings,
    PlacementSettings,
    ScalingSettings,
    SheddingSettings,
    overlay,
)
from controller.settings_env import env_problem
from core.files import read_text
from core.model_base import NoBooleanNumbers, TrimtabModel
from core.scenario import MAX_KEY_GROUPS, format_validation_error
from core.yaml_text import load_yaml, yaml_problem

__all__ = [
    "ConfigError",
    "Settings",
    "load_settings",
    "log_problem",
    "path_problems",
    "port_problem",
]

_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)
_WINDOW = re.compile(r"^([01]\d|2[0-3]):[0-5]\d-(([01]\d|2[0-3]):[0-5]\d|24:00)$")
MIN_LEASE_S = 0.5  # control.lease_timeout_s: renewed every quarter of it


class ConfigError(ValueError):
    """An invalid configuration; ``problems`` holds one line per error."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


class ControlSettings(TrimtabModel):
    """The control loop."""

    model_config = _STRICT
    interval_s: float = Field(  # the scheduler ran a sub-microsecond interval once a second
        10.0, ge=0.01, le=3600, description="seconds between control rounds (0.01 to 3600)"
    )
    misfire_grace_s: float | None = Field(None, gt=0, description="default: one interval")
    window_samples: int = Field(10, ge=3, le=1000, description="load samples per window (k)")
    dry_run: bool = Field(False, description="compute and log plans, apply nothing")
    take_over: bool = Field(
        False,
        description="spark-external: lead at an epoch above that of the plans the pipeline "
        "runs, fencing out the controller that published them (one whose decision log is lost)",
    )
    on_batch: bool = Field(
        False,
        description="spark-external: also run a round as soon as a new micro-batch's statistics "
        "land (the plan then reaches the next batch, not the one after it); interval_s stays "
        "the longest wait",
    )
    max_rounds: int | None = Field(
        None, ge=1, description="stop after this many rounds (tests, batch use)"
    )
    blackout_windows_utc: list[str] = Field(
        default_factory=list, description='"HH:MM-HH:MM" spans with no changes'
    )
    lease_timeout_s: float = Field(
        10.0,
        le=600,
        description="a standby takes over this long after the primary's last lease renewal",
    )

    @field_validator("lease_timeout_s")
    @classmethod
    def _lease(cls, v: float) -> float:
        if not v >= MIN_LEASE_S:  # 0.01 s: a lone daemon lost and retook it 55 times in 12 s
            raise ValueError(
                f"at least {MIN_LEASE_S} s: the primary renews its lease every quarter of it, "
                "and a shorter one lapses between renewals (each retake a new epoch and plan)"
            )
        return v

    @field_validator("blackout_windows_utc")
    @classmethod
    def _windows(cls, v: list[str]) -> list[str]:
        for w in v:
            if not _WINDOW.match(w):
                raise ValueError(f"blackout window {w!r} is not HH:MM-HH:MM")
            if w[:5] == w[6:]:  # a window of no minute: it held nothing back, and said nothing
                raise ValueError(
                    f"blackout window {w!r} is empty: it ends where it starts (a whole day is "
                    "00:00-24:00)"
                )
        return v

    @model_validator(mode="after")
    def _grace(self) -> ControlSettings:
        if self.misfire_grace_s is not None and self.misfire_grace_s > 2 * self.interval_s:
            raise ValueError(
                f"misfire_grace_s {self.misfire_grace_s} exceeds twice interval_s {self.interval_s}"
            )
        return self


# the shipped scenario a config that names none steers: the repository's file, found from any
# directory (as a relative default it was looked for in the current one)
DEFAULT_SCENARIO = str(
    Path(__file__).resolve().parents[1] / "scenarios" / "anticorrelated-diurnal.yaml"
)


class SubstrateConfig(TrimtabModel):
    """What the daemon steers."""

    model_config = _STRICT
    kind: Literal["sim", "spark-external"] = "sim"
    scenario: str = Field(
        DEFAULT_SCENARIO,
        description="scenario file (sim); default: the shipped anticorrelated-diurnal",
    )
    ticks_per_round: int | None = Field(
        None, ge=1, description="simulated ticks per round; default interval_s / tick_s"
    )
    workdir: str | None = Field(None, description="pipeline working directory (spark-external)")
    partitions: int = Field(2, ge=1, le=MAX_KEY_GROUPS)
    calibration: str | None = Field(
        None,
        description="spark-external: a trimtab calibrate overlay for the load model (row cost, "
        "partition capacity left by the batches' fixed costs)",
    )


class MetricsConfig(TrimtabModel):
    """The Prometheus endpoint."""

    model_config = _STRICT
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(9464, ge=0, le=65535, description="0 picks a free port")

    @field_validator("host")
    @classmethod
    def _loopback(cls, v: str) -> str:
        try:
            ok = ipaddress.ip_address(v).is_loopback
        except ValueError:
            ok = v == "localhost"
        if not ok:
            raise ValueError(f"host {v!r} is not a loopback address (use 127.0.0.1)")
        return v


class Settings(NoBooleanNumbers, BaseSettings):
    """All daemon settings."""

    model_config = SettingsConfigDict(
        env_prefix="TRIMTAB_", env_nested_delimiter="__", extra="forbid"
    )
    control: ControlSettings = Field(default_factory=ControlSettings)
    placement: PlacementSettings = Field(default_factory=PlacementSettings)
    shedding: SheddingSettings = Field(default_factory=SheddingSettings)
    availability: HASettings = Field(default_factory=HASettings)
    scaling: ScalingSettings = Field(default_factory=ScalingSettings)
    substrate: SubstrateConfig = Field(default_factory=SubstrateConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    decision_log: str = Field(".trimtab/decisions.sqlite", description="SQLite decision log")
    decision_retention_rounds: int = Field(
        10_000, ge=10, description="rounds kept in the decision log"
    )
    state_dir: str = Field(".trimtab", description="status file and other runtime state")
    log_format: Literal["json", "console"] = "json"

    @model_validator(mode="after")
    def _known_method(self) -> Settings:
        if self.control.on_batch and self.substrate.kind != "spark-external":
            raise ValueError(
                f"control.on_batch: rounds on micro-batches need substrate.kind spark-external "
                f"(got {self.substrate.kind!r})"
            )
        self._substrate_fields()
        p = self.placement  # the names this config sets (else the scenario's, checked there)
        given = {f: getattr(p, f) for f in ("method", "initial") if f in p.model_fields_set}
        if (bad := method_problem(given)) is not None:
            raise ValueError(f"placement.{bad}")
        return self

    def _substrate_fields(self) -> None:
        """A setting the chosen substrate would ignore is refused by name."""
        sub, given = self.substrate, self.substrate.model_fields_set
        if sub.kind == "sim":
            for f in ("workdir", "partitions", "calibration"):
                if f in given:
                    raise ValueError(
                        f"substrate.{f}: steers a spark-external pipeline (substrate.kind is 'sim')"
                    )
            if self.control.take_over:
                raise ValueError(
                    "control.take_over: leads above a Spark pipeline's plans (substrate.kind is "
                    "'sim', which has none)"
                )
        elif "ticks_per_round" in given:
            raise ValueError(
                "substrate.ticks_per_round: the simulator's (substrate.kind is 'spark-external')"
            )

    def controller_settings(self, base: ControllerSettings | None = None) -> ControllerSettings:
        """The settings the controller runs with: the steered scenario's (``base``) with every
        field this config sets (round interval, window, placement, shedding, scaling,
        availability)."""
        top: dict[str, Any] = {}
        if "interval_s" in self.control.model_fields_set:
            top["interval_s"] = self.control.interval_s
        if "window_samples" in self.control.model_fields_set:
            top["window_k"] = self.control.window_samples
        for mine, theirs in (
            ("placement", "placement"),
            ("shedding", "shedding"),
            ("scaling", "scaling"),
        ):
            if mine in self.model_fields_set:
                top[theirs] = getattr(self, mine)
        if "availability" in self.model_fields_set:
            top["ha"] = self.availability
        return overlay(base or ControllerSettings(), ControllerSettings(**top))

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """init > environment > YAML file > defaults (sources are deep-merged)."""
        sources: tuple[PydanticBaseSettingsSource, ...] = (init_settings, env_settings)
        if _YAML_PATH is not None:
            sources += (YamlConfigSettingsSource(settings_cls, yaml_file=_YAML_PATH),)
        return sources


_YAML_PATH: Path | None = None


def _creatable(path: Path) -> str | None:
    """Why ``path`` (a file or directory to be created or written) is not usable, or None."""
    if path.exists():
        return None if os.access(path, os.W_OK) else "not writable"
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, not a directory"
    return None if os.access(parent, os.W_OK) else f"{parent} is not writable"


def path_problems(settings: Settings) -> list[str]:
    """The settings' files and directories that cannot be created or written, and a
    simulated substrate's scenario that does not exist, one line each. (An external
    pipeline's workdir may appear after the daemon starts: it waits for it.)"""
    out = []
    for field, value in (
        ("decision_log", settings.decision_log),
        ("state_dir", settings.state_dir),
    ):
        why = _creatable(Path(value))
        if why:
            out.append(f"{field}: {value}: {why}")
    sub = settings.substrate
    if sub.kind == "sim" and not Path(sub.scenario).is_file():
        out.append(f"substrate.scenario: file not found: {sub.scenario}")
    if sub.calibration is not None and not Path(sub.calibration).is_file():
        out.append(f"substrate.calibration: file not found: {sub.calibration}")
    return out


def log_problem(settings: Settings) -> str | None:
    """``decision_log`` names a file that is not a trimtab decision log (another file, a
    directory), or its lease file is not a lease, or None: a daemon would fail on it at its first write. Opens it read-only."""
    from controller.decisionlog import DecisionLog, DecisionLogError, lease_file
    from core.lease import lease_problem

    p = Path(settings.decision_log)
    if p.is_dir():
        return f"decision_log: {p} is a directory, not a file"
    if problem := lease_problem(lease_file(p)):  # the controllers' lease beside it
        return f"decision_log: its lease {problem}"
    if not p.is_file():
        return None  # created at the start
    try:
        DecisionLog.read_only(p).close()
    except DecisionLogError as e:
        return f"decision_log: {e}"
    return None


def port_problem(settings: Settings) -> str | None:
    """``metrics.port`` already taken on ``metrics.host``, or None (0: any free port)."""
    import socket

    m = settings.metrics
    if m.port == 0:
        return None
    with socket.socket() as s:
        # as the metrics server binds: a port whose last connections wait out TIME_WAIT (a
        # daemon just stopped after a scrape) is free to listen on again; a listener is not
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((m.host, m.port))
        except OSError as e:
            return f"metrics.port: {m.port} on {m.host}: {e.strerror.lower() if e.strerror else e}"
    return None


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings from the YAML file (if any), the environment and ``overrides``."""
    global _YAML_PATH
    src = "settings"
    raw: Any = None
    if path is not None:
        p = Path(path)
        src = str(p)
        text, problem = read_text(p)
        if problem is not None:
            raise ConfigError(src, [problem])
        try:
            raw = load_yaml(text or "")
        except yaml.YAMLError as e:
            raise ConfigError(src, [f"not valid YAML: {yaml_problem(e)}"]) from None
        if raw is not None and not isinstance(raw, dict):
            raise ConfigError(src, ["(root): expected a mapping of settings"])
    if (bad := env_problem(os.environ, Settings)) is not None:
        raise ConfigError(f"environment {bad[0]}", [bad[1]])
    try:
        _YAML_PATH = Path(path) if path is not None else None
        settings = Settings(**overrides)
        return settings if path is None else _relative_to_file(settings, Path(path), raw, overrides)
    except ValidationError as e:
        problems = format_validation_error(e)
        raise ConfigError(*attributed(problems, src)) from None
    finally:
        _YAML_PATH = None


PATH_FIELDS = (
    "substrate.scenario",
    "substrate.workdir",
    "substrate.calibration",
    "decision_log",
    "state_dir",
)


def _relative_to_file(
    settings: Settings, path: Path, raw: dict[str, Any] | None, overrides: dict[str, Any]
) -> Settings:
    """Relative paths the file sets resolve against the file's directory (as a scenario's
    trace paths resolve against the scenario); those from the environment or the command
    line resolve against the current directory, as a shell user expects."""
    changes: dict[str, Any] = {}
    for field in PATH_FIELDS:
        parts = field.split(".")
        in_file: Any = raw or {}
        for part in parts:
            in_file = in_file.get(part) if isinstance(in_file, dict) else None
        given: Any = overrides
        for part in parts:
            given = given.get(part) if isinstance(given, dict) else None
        if (
            not isinstance(in_file, str)
            or given is not None
            or _env_name(field) in os.environ
            or Path(in_file).is_absolute()
        ):
            continue
        changes[field] = str(path.parent / in_file)
    if not changes:
        return settings
    sub = {k.split(".")[1]: v for k, v in changes.items() if k.startswith("substrate.")}
    top = {k: v for k, v in changes.items() if "." not in k}
    if sub:
        top["substrate"] = settings.substrate.model_copy(update=sub)
    return settings.model_copy(update=top)


def blame(problems: list[str], source: str) -> str:
    """Where the first problem's value came from: ``environment TRIMTAB_...`` when a
    variable set its field, or another field of its section that the problem names
    (``failure_timeout_s ... is below heartbeat_timeout_s``), else ``source`` (the file)."""
    env = [n for n in _env_names(problems[0]) if n in os.environ] if problems else []
    return f"environment {env[0]}" if env else source


def attributed(problems: list[str], source: str) -> tuple[str, list[str]]:
    """``ConfigError``'s arguments: the first problem's source (``blame``), and the problems,
    each from another source prefixed with its own."""
    first = blame(problems, source)
    each = [(blame([q], source), q) for q in problems]
    return first, [q if where == first else f"{where}: {q}" for where, q in each]


def _env_names(problem: str) -> list[str]:
    """The environment variables that set a problem's field (``metrics.port: ...`` ->
    ``TRIMTAB_METRICS__PORT``), then those that set a field of its section named in its text."""
    field, _, text = problem.partition(":")
    section, _, _ = field.strip().rpartition(".")
    own = _env_name(field.strip())
    words = set(re.findall(r"[a-z_0-9]+", text))
    named = [_env_name(f"{section}.{w}") for w in sorted(words) if section]
    return [own, *(n for n in named if n != own)]


def _env_name(field: str) -> str:
    """The environment variable that sets a field: ``metrics.port`` -> ``TRIMTAB_METRICS__PORT``."""
    return "TRIMTAB_" + field.upper().replace(".", "__")
