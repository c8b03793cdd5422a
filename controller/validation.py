"""Checking a user's file before anything runs: which kind it is, and whether it is valid.

``file_kind`` tells a plan (``placement`` and ``version``), a daemon config (any of
``control``, ``substrate``, ``metrics``, ``decision_log``) and a scenario apart by their
top-level keys; ``validate_file`` loads the file as that kind, raising the kind's own error
(``ScenarioError`` or ``ConfigError``) that names the field and the problem.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from controller.config import ConfigError, load_settings, path_problems
from controller.scenario import load_scenario
from core.plans import Plan
from core.scenario import format_validation_error

__all__ = ["CONFIG_KEYS", "file_kind", "validate_file"]

CONFIG_KEYS = frozenset({"control", "substrate", "metrics", "decision_log"})


def file_kind(data: Any) -> str:
    """``plan``, ``config`` or ``scenario`` from a parsed file's top-level keys.

    >>> file_kind({"version": 3, "placement": {}}), file_kind({"metrics": {}}), file_kind([])
    ('plan', 'config', 'scenario')
    """
    if isinstance(data, dict) and "placement" in data and "version" in data:
        return "plan"
    if isinstance(data, dict) and CONFIG_KEYS & set(data):
        return "config"
    return "scenario"


def validate_file(path: Path) -> str:
    """Load ``path`` as the kind it looks like; return the kind or raise its error."""
    try:
        data = yaml.safe_load(path.read_text()) if path.is_file() else None
    except yaml.YAMLError:
        data = None  # the scenario loader reports the YAML error with its position
    kind = file_kind(data)
    if kind == "plan":
        try:
            Plan.model_validate(data)
        except ValidationError as e:
            raise ConfigError(str(path), format_validation_error(e)) from None
    elif kind == "config":
        problems = path_problems(load_settings(path))
        if problems:
            raise ConfigError(str(path), problems)
    else:
        load_scenario(path)
    return kind
