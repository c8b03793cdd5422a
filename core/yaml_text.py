"""YAML as a user's file is read: a key given twice in one mapping is refused, and a YAML
error is said in one line with its place.

PyYAML keeps the last of two equal keys without a word, so a second ``controller:`` block
appended to a scenario (or a second ``metrics:`` in a config) silently replaced the first.
Keys merged in with ``<<`` may still be overridden: that is what a merge is for.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node

__all__ = ["load_yaml", "yaml_problem"]


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping whose own keys repeat."""

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            first: dict[Any, Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = first.setdefault(key, key_node)
                except TypeError:
                    continue  # a key that is not hashable: SafeLoader names it
                if seen is not key_node:
                    raise ConstructorError(
                        None,
                        None,
                        f"the key {key!r} is given twice in one mapping (first on line "
                        f"{seen.start_mark.line + 1}); the later would silently replace the "
                        "earlier",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)  # type: ignore[arg-type]


def load_yaml(text: str) -> Any:
    """The document in ``text``, as ``yaml.safe_load`` reads it, but a key given twice in
    one mapping is a ``yaml.YAMLError``.

    >>> load_yaml("a: 1\\nb: {c: 2}\\n")
    {'a': 1, 'b': {'c': 2}}
    >>> load_yaml("base: &b {x: 1, y: 2}\\nuse: {<<: *b, y: 3}\\n")["use"]
    {'x': 1, 'y': 3}
    >>> try:
    ...     load_yaml("a: 1\\nb: 2\\na: 3\\n")
    ... except yaml.YAMLError as e:
    ...     print(yaml_problem(e))
    line 3, column 1: the key 'a' is given twice in one mapping (first on line 1); the later would silently replace the earlier
    >>> try:
    ...     load_yaml("ops:\\n  - {id: f, kind: filter, kind: map}\\n")
    ... except yaml.YAMLError as e:
    ...     print(yaml_problem(e))
    line 2, column 27: the key 'kind' is given twice in one mapping (first on line 2); the later would silently replace the earlier
    """
    return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader


def yaml_problem(e: yaml.YAMLError) -> str:
    r"""A YAML error in one line, with its line and column (1-based).

    Examples
    --------
    >>> try:
    ...     yaml.safe_load("a: [1, 2\nb: 3\n")
    ... except yaml.YAMLError as e:
    ...     print(yaml_problem(e))
    line 2, column 2: while parsing a flow sequence, expected ',' or ']', but got ':'
    """
    mark = getattr(e, "problem_mark", None)
    what = (
        ", ".join(x for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x)
        or str(e).splitlines()[0]
    )
    if mark is None:
        return what
    return f"line {mark.line + 1}, column {mark.column + 1}: {what}"
