"""The base of trimtab's file models: a number is written as a number.

pydantic's lax mode reads a boolean where a number is expected (YAML's ``true``, ``yes`` or
``on`` become 1, ``false`` 0): ``capacity: yes`` ran a node of capacity 1 and ``duration_s:
true`` a one-second scenario, with no word. Every model of a scenario, config, plan or overlay
derives from :class:`TrimtabModel`, whose numeric fields refuse a boolean by name. Strings
still convert (environment variables are strings), and a field that admits a boolean keeps it.
"""

from __future__ import annotations

import types
import typing
import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

BOOLEAN = "a number is needed, not a boolean (true/false, yes/no, on/off)"
# the configuration of every file model: unknown keys refused, frozen, numbers finite
STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def numeric(tp: Any) -> bool:
    """Whether a field of type ``tp`` holds a number and no boolean (``float``, ``int | None``).

    >>> numeric(float), numeric(int | None), numeric(bool), numeric(float | bool), numeric(str)
    (True, True, False, False, False)
    """
    if tp in (int, float):
        return True
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        return bool not in args and any(numeric(a) for a in args)
    return False


class NoBooleanNumbers:
    """The check, for any pydantic model (a settings class mixes it in). It is a model
    validator: a field validator would also run on a discriminated union's tag, which pydantic
    refuses."""

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_for_a_number(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, f in cls.model_fields.items():  # type: ignore[attr-defined]
                v = data.get(f.alias or name)
                if isinstance(v, bool) and numeric(f.annotation):
                    raise ValueError(f"{f.alias or name}: {BOOLEAN}")
        return data


class TrimtabModel(NoBooleanNumbers, BaseModel):
    """A pydantic model whose numeric fields refuse a boolean.

    >>> class Node(TrimtabModel):
    ...     capacity: float
    >>> Node(capacity=2).capacity
    2.0
    >>> try:
    ...     Node(capacity=True)
    ... except ValueError as e:
    ...     print(e.errors()[0]["msg"])  # type: ignore[attr-defined]
    Value error, capacity: a number is needed, not a boolean (true/false, yes/no, on/off)
    """


def plain_id(value: str) -> str:
    """An id as tables, log lines, metrics and plan files show it: not blank, and without a
    control character (a newline from a YAML block scalar broke one-line reasons).

    >>> plain_id("n0")
    'n0'
    >>> try:
    ...     plain_id("q\\nb")
    ... except ValueError as e:
    ...     print(e)
    holds a control character (U+000A), which no table or log line shows
    """
    if not value.strip():
        raise ValueError("an id must not be blank")
    bad = next((c for c in value if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise ValueError(
            f"holds a control character (U+{ord(bad):04X}), which no table or log line shows"
        )
    return value


Id = Annotated[str, AfterValidator(plain_id)]
