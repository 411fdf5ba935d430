"""No function in the library is longer than 60 lines of code: each reads as a few named steps.

Lines of code: the ``def`` line and the body after the docstring (a signature over several lines
counts as one line). ``benchmarks/`` (measurement scripts, not in ``PACKAGES``) and
``tests/`` are not counted.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ["envs", "world_model", "critic", "policy", "imagination", "experiments"]
LIMIT = 60

# Functions allowed over the limit, as ``path::qualified.name``. Empty: every library function fits.
# Split a function that grows too long rather than listing it here.
ALLOWED: set[str] = set()


def code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The ``def`` line plus the body after the docstring (comments and blank lines inside count: they
    are part of what a reader scrolls through; a signature over several lines counts once)."""
    body = node.body
    has_docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(
        body[0].value.value, str
    )
    if has_docstring and len(body) == 1:
        return 1
    first = body[1] if has_docstring else body[0]
    first_line = min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", [])])
    return 1 + node.end_lineno - first_line + 1


def long_functions(root: pathlib.Path, limit: int = LIMIT) -> list[str]:
    """``path::qualified.name (N)`` for every function over ``limit`` code lines."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            source = path.read_text(encoding="utf-8")
            found += _walk(ast.parse(source), source, relative, "", limit)
    return found


def _walk(tree: ast.AST, source: str, relative: str, prefix: str, limit: int) -> list[str]:
    found = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef) and (n := code_lines(node)) > limit:
                found.append(f"{relative}::{name} ({n})")
            found += _walk(node, source, relative, f"{name}.", limit)
    return found


def test_no_library_function_is_over_60_lines():
    over = [entry for entry in long_functions(ROOT) if entry.split(" (")[0] not in ALLOWED]
    assert over == [], "split these into named steps:\n" + "\n".join(over)


def test_the_allow_list_holds_only_real_offenders():
    current = {entry.split(" (")[0] for entry in long_functions(ROOT)}
    assert ALLOWED <= current, f"no longer over the limit, remove from ALLOWED: {sorted(ALLOWED - current)}"


def test_the_counter_leaves_out_the_docstring_and_the_signature_lines(tmp_path):
    (tmp_path / "policy").mkdir()
    docstring = '    """A docstring\n\n    of several lines."""\n'
    statements = "".join(f"    x{i} = {i}\n" for i in range(LIMIT - 1))  # with the def line: exactly LIMIT
    (tmp_path / "policy" / "ok.py").write_text(f"def fine(\n    a,\n    b,\n):\n{docstring}{statements}")
    nested = statements.replace("    x", "        x")
    (tmp_path / "policy" / "long.py").write_text(f"class A:\n    def f(self):\n{nested}\n        y = 1\n")
    assert long_functions(tmp_path) == ["policy/long.py::A.f (62)"]  # def + 59 + a blank line + 1
