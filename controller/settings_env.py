"""The ``TRIMTAB_`` environment variables a daemon's settings read, checked before they are:
a misspelt name would be ignored without a word, and a list or mapping not written as JSON
stopped the settings with an error that named no variable."""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

OTHER_ENV = ("TRIMTAB_CONFIG", "TRIMTAB_NO_PROGRESS", "TRIMTAB_EXECUTOR_SLOWDOWN")  # not settings


def env_problem(environ: Mapping[str, str], settings: type[BaseModel]) -> tuple[str, str] | None:
    """A ``TRIMTAB_`` variable that sets no field of ``settings``, or sets a list or mapping
    with text that is not JSON, with why: the settings read only the names of their own
    fields, so a misspelt one (one underscore between a section and its key, or a section
    that does not exist) would be ignored.

    >>> from controller.config import Settings as S
    >>> env_problem({"TRIMTAB_CONTROL__INTERVAL_S": "5", "TRIMTAB_NO_PROGRESS": "1"}, S) is None
    True
    >>> env_problem({"TRIMTAB_CONTROL_INTERVAL_S": "5"}, S)[1]
    'not a setting: a section and its key are joined by two underscores (TRIMTAB_CONTROL__INTERVAL_S)'
    >>> env_problem({"TRIMTAB_CONTROLL__INTERVAL_S": "5"}, S)[1].split(" (")[0]
    "not a setting: no setting 'controll'"
    >>> env_problem({"TRIMTAB_CONTROL__BLACKOUT_WINDOWS_UTC": "23:00-01:00"}, S)[1]
    'control.blackout_windows_utc: a list is given as JSON, e.g. \\'["a", "b"]\\' (got \\'23:00-01:00\\')'
    """
    fields = set(settings.model_fields)
    sections = sorted(f for f, info in settings.model_fields.items() if _model(info.annotation))
    for name in sorted(environ):
        if not name.startswith("TRIMTAB_") or name in OTHER_ENV:
            continue
        rest = name.removeprefix("TRIMTAB_").lower()
        head = rest.split("__", 1)[0]
        if head in fields:
            if (problem := _json_problem(settings, rest.split("__"), environ[name])) is not None:
                return name, problem
            continue
        section = next((f for f in sections if head.startswith(f + "_")), None)
        if section is not None:
            fixed = "TRIMTAB_" + (section + "__" + rest[len(section) + 1 :]).upper()
            why = f"a section and its key are joined by two underscores ({fixed})"
        else:
            known, other = ", ".join(sorted(fields)), ", ".join(OTHER_ENV)
            why = f"no setting {head!r} (the settings: {known}; besides them {other})"
        return name, f"not a setting: {why}"
    return None


def _json_problem(model: type[BaseModel], path: list[str], value: str) -> str | None:
    """Why ``value`` cannot set the field at ``path`` when that field is a list, a mapping or
    a section (the settings read those as JSON), else None (pydantic names the rest)."""
    annotation: Any = model
    for part in path:
        inner = _model(annotation)
        if inner is None or part not in inner.model_fields:
            return None  # pydantic names a key that is not there
        annotation = inner.model_fields[part].annotation
    kind = _json_kind(annotation)
    if kind is None:
        return None
    try:
        json.loads(value)
    except ValueError:
        example = '["a", "b"]' if kind == "list" else '{"key": 1}'
        return f"{'.'.join(path)}: a {kind} is given as JSON, e.g. {example!r} (got {value!r})"
    return None


def _model(annotation: Any) -> type[BaseModel] | None:
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _json_kind(annotation: Any) -> str | None:
    """``list`` or ``mapping`` when the settings read the field from JSON, else None."""
    if get_origin(annotation) in (Union, types.UnionType):
        kinds = [_json_kind(a) for a in get_args(annotation) if a is not type(None)]
        return next((k for k in kinds if k is not None), None)
    origin = get_origin(annotation) or annotation
    if origin in (list, tuple, set, frozenset):
        return "list"
    if origin is dict or _model(annotation) is not None:
        return "mapping"
    return None
