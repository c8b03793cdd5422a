"""A map operator's expression: arithmetic over an input row's numeric columns.

The grammar is deliberately small, so that one parsed expression means the same in Spark SQL
(the pipeline) and in numpy (the reference the output is checked against): numbers, the
columns ``v`` and ``c``, ``+ - * /``, unary minus, parentheses and ``abs(x)``, in double
precision. A row whose value is not a finite number after the maps (a division by zero: NULL
through ``try_divide`` in Spark SQL, inf or nan in numpy) is dropped, as a filter would drop
it. No pyspark import.
"""

from __future__ import annotations

import ast

import numpy as np
from numpy.typing import NDArray

__all__ = ["COLUMNS", "Expr", "parse"]

COLUMNS = ("v", "c")  # the numeric columns of an input row
_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_NP = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}


class Expr:
    """A parsed, checked expression.

    >>> e = parse("abs(v - 3) * 2 + c")
    >>> e.sql({"v": "`v`", "c": "`c`"})
    '((abs((`v` - 3.0D)) * 2.0D) + `c`)'
    >>> parse("v / c").sql({"v": "`v`", "c": "`c`"})
    'try_divide(`v`, `c`)'
    >>> e.evaluate({"v": np.array([1.0, 5.0]), "c": np.array([0.0, 1.0])}).tolist()
    [4.0, 5.0]
    >>> parse("v * 2").compose({"v": parse("v + 1")}).sql({"v": "`v`", "c": "`c`"})
    '((`v` + 1.0D) * 2.0D)'
    """

    def __init__(self, node: ast.expr, text: str) -> None:
        self.node = node
        self.text = text

    def sql(self, env: dict[str, str]) -> str:
        """Spark SQL text, each column replaced by ``env[column]`` (an SQL expression)."""
        return _sql(self.node, env)

    def evaluate(self, env: dict[str, NDArray[np.float64]]) -> NDArray[np.float64]:
        """The values for columns given as arrays."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.asarray(_eval(self.node, env), dtype=np.float64)
        return np.broadcast_to(out, np.broadcast(*env.values()).shape).astype(np.float64)

    def compose(self, inner: dict[str, Expr]) -> Expr:
        """This expression with columns replaced by other expressions (a map after a map)."""
        node = _Substitute({k: e.node for k, e in inner.items()}).visit(_copy(self.node))
        return Expr(node, self.text)

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"


def parse(text: str, field: str = "expr") -> Expr:
    """Parse ``text``; ``ValueError`` naming ``field`` and the offending part if it is not in the
    grammar.

    >>> parse("v ** 2")
    Traceback (most recent call last):
    ...
    ValueError: expr: '**' is not allowed; use numbers, v, c, + - * /, parentheses and abs()
    >>> parse("w + 1")
    Traceback (most recent call last):
    ...
    ValueError: expr: unknown column 'w' (columns: v, c)
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{field}: an expression is needed, e.g. 'v * 2'")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"{field}: {text!r} is not an expression") from None
    _check(tree.body, field, text)
    return Expr(tree.body, text.strip())


_HINT = "use numbers, v, c, + - * /, parentheses and abs()"


def _check(node: ast.AST, field: str, text: str) -> None:
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BIN:
            part = ast.get_source_segment(text, node) or ""
            op = {ast.Pow: "**", ast.Mod: "%", ast.FloorDiv: "//"}.get(type(node.op), part)
            raise ValueError(f"{field}: {op!r} is not allowed; {_HINT}")
        _check(node.left, field, text)
        _check(node.right, field, text)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        _check(node.operand, field, text)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        if not np.isfinite(node.value):
            raise ValueError(f"{field}: {node.value!r} is not a finite number")
    elif isinstance(node, ast.Name):
        if node.id not in COLUMNS:
            raise ValueError(f"{field}: unknown column {node.id!r} (columns: {', '.join(COLUMNS)})")
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "abs"
        and len(node.args) == 1
        and not node.keywords
    ):
        _check(node.args[0], field, text)
    else:
        part = ast.get_source_segment(text, node) or type(node).__name__
        raise ValueError(f"{field}: {part!r} is not allowed; {_HINT}")


def _sql(node: ast.expr, env: dict[str, str]) -> str:
    if isinstance(node, ast.BinOp):
        a, b = _sql(node.left, env), _sql(node.right, env)
        if isinstance(node.op, ast.Div):  # NULL on a zero divisor, not an error (ANSI mode)
            return f"try_divide({a}, {b})"
        return f"({a} {_BIN[type(node.op)]} {b})"
    if isinstance(node, ast.UnaryOp):
        return (
            f"(-{_sql(node.operand, env)})"
            if isinstance(node.op, ast.USub)
            else _sql(node.operand, env)
        )
    if isinstance(node, ast.Constant):
        return f"{float(node.value)!r}D"
    if isinstance(node, ast.Name):
        return env[node.id]
    assert isinstance(node, ast.Call)
    return f"abs({_sql(node.args[0], env)})"


def _eval(node: ast.expr, env: dict[str, NDArray[np.float64]]) -> NDArray[np.float64] | float:
    if isinstance(node, ast.BinOp):
        return _NP[_BIN[type(node.op)]](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        x = _eval(node.operand, env)
        return -x if isinstance(node.op, ast.USub) else x
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        return env[node.id]
    assert isinstance(node, ast.Call)
    return np.abs(_eval(node.args[0], env))


class _Substitute(ast.NodeTransformer):
    def __init__(self, inner: dict[str, ast.expr]) -> None:
        self.inner = inner

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return _copy(self.inner[node.id]) if node.id in self.inner else node


def _copy(node: ast.expr) -> ast.expr:
    return ast.parse(ast.unparse(node), mode="eval").body
