"""Daemon settings: a YAML file plus ``TRIMTAB_...`` environment variables, validated at start.

Priority: init arguments > environment (``TRIMTAB_CONTROL__INTERVAL_S=5``) > YAML file >
defaults. Units are in the key names. Every host must be a loopback address. A bad key or
value raises ``ConfigError`` with one line per problem naming the dotted key and the value;
the CLI prints them and exits 2.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from core.scenario import format_validation_error

__all__ = ["ConfigError", "Settings", "load_settings"]

_STRICT = ConfigDict(extra="forbid")
_WINDOW = re.compile(r"^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$")


class ConfigError(ValueError):
    """An invalid configuration; ``problems`` holds one line per error."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


class ControlSettings(BaseModel):
    """The control loop."""

    model_config = _STRICT
    interval_s: float = Field(10.0, gt=0, le=3600, description="seconds between control rounds")
    misfire_grace_s: float | None = Field(None, gt=0, description="default: one interval")
    window_samples: int = Field(10, ge=3, le=1000, description="load samples per window (k)")
    dry_run: bool = Field(False, description="compute and log plans, apply nothing")
    max_rounds: int | None = Field(
        None, ge=1, description="stop after this many rounds (tests, batch use)"
    )
    blackout_windows_utc: list[str] = Field(
        default_factory=list, description='"HH:MM-HH:MM" spans with no changes'
    )

    @field_validator("blackout_windows_utc")
    @classmethod
    def _windows(cls, v: list[str]) -> list[str]:
        for w in v:
            if not _WINDOW.match(w):
                raise ValueError(f"blackout window {w!r} is not HH:MM-HH:MM")
        return v

    @model_validator(mode="after")
    def _grace(self) -> ControlSettings:
        if self.misfire_grace_s is not None and self.misfire_grace_s > 2 * self.interval_s:
            raise ValueError(
                f"misfire_grace_s {self.misfire_grace_s} exceeds twice interval_s {self.interval_s}"
            )
        return self


class PlacementConfig(BaseModel):
    """Placement method and anti-flapping."""

    model_config = _STRICT
    method: str = "correlation-oneway"
    pair_threshold: float = Field(
        0.2, gt=0, le=1, description="node mean-load gap that forms a pair"
    )
    load_threshold: float = Field(
        0.005, ge=0, le=1, description="lightest operator load considered"
    )
    min_gain: float = Field(
        0.0, ge=0, description="minimum expected drop of mean node-load variance"
    )
    cooldown_rounds: int = Field(1, ge=0, description="rounds without moves after a change")
    max_moves: int = Field(50, ge=0, description="most operators moved in one round")
    ineffective_hold_rounds: int = Field(
        5, ge=0, description="rounds an operator whose move did not help stays put"
    )


class SheddingConfig(BaseModel):
    """Load shedding."""

    model_config = _STRICT
    method: Literal["none", "lp", "fit", "uniform", "local"] = "lp"
    headroom: float = Field(0.95, gt=0, le=1, description="plan against headroom x capacity")
    plan_table: bool = Field(
        False, description="lp: answer from a rate-grid table of plans solved ahead (LRU 4096)"
    )
    plan_table_step: float = Field(
        0.1, gt=0, le=1, description="plan-table grid step, as a fraction of the recent max rate"
    )


class AvailabilityConfig(BaseModel):
    """Availability policy and failure detection."""

    model_config = _STRICT
    policy: Literal["none", "upstream", "passive", "active"] = "upstream"
    heartbeat_timeout_s: float = Field(5.0, gt=0, description="silence before a node is suspected")
    failure_timeout_s: float = Field(
        15.0, gt=0, description="silence before a node is declared failed"
    )

    @model_validator(mode="after")
    def _order(self) -> AvailabilityConfig:
        if self.failure_timeout_s < self.heartbeat_timeout_s:
            raise ValueError(
                f"failure_timeout_s {self.failure_timeout_s} is below heartbeat_timeout_s {self.heartbeat_timeout_s}"
            )
        return self


class SubstrateConfig(BaseModel):
    """What the daemon steers."""

    model_config = _STRICT
    kind: Literal["sim", "spark-external"] = "sim"
    scenario: str = Field(
        "scenarios/anticorrelated-diurnal.yaml", description="scenario file (sim)"
    )
    ticks_per_round: int | None = Field(
        None, ge=1, description="simulated ticks per round; default interval_s / tick_s"
    )
    workdir: str | None = Field(None, description="pipeline working directory (spark-external)")
    partitions: int = Field(2, ge=1)


class MetricsConfig(BaseModel):
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


class Settings(BaseSettings):
    """All daemon settings."""

    model_config = SettingsConfigDict(
        env_prefix="TRIMTAB_", env_nested_delimiter="__", extra="forbid"
    )
    control: ControlSettings = Field(default_factory=ControlSettings)
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    shedding: SheddingConfig = Field(default_factory=SheddingConfig)
    availability: AvailabilityConfig = Field(default_factory=AvailabilityConfig)
    substrate: SubstrateConfig = Field(default_factory=SubstrateConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    decision_log: str = Field(".trimtab/decisions.sqlite", description="SQLite decision log")
    decision_retention_rounds: int = Field(
        10_000, ge=10, description="rounds kept in the decision log"
    )
    state_dir: str = Field(".trimtab", description="status file and other runtime state")
    log_format: Literal["json", "console"] = "json"

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


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings from the YAML file (if any), the environment and ``overrides``."""
    global _YAML_PATH
    src = "settings"
    if path is not None:
        p = Path(path)
        src = str(p)
        if not p.is_file():
            raise ConfigError(src, [f"file not found: {p}"])
        try:
            raw = yaml.safe_load(p.read_text())
        except yaml.YAMLError as e:
            raise ConfigError(src, [f"not valid YAML: {str(e).splitlines()[0]}"]) from None
        if raw is not None and not isinstance(raw, dict):
            raise ConfigError(src, ["(root): expected a mapping of settings"])
    try:
        _YAML_PATH = Path(path) if path is not None else None
        return Settings(**overrides)
    except ValidationError as e:
        raise ConfigError(src, format_validation_error(e)) from None
    finally:
        _YAML_PATH = None
