"""The house rules that keep rooms small: modules under 400 lines, functions under 40."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jupyter_ci"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 40


def test_every_module_and_function_of_the_package_is_small() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50, "the package was not found"
    too_big = []
    for path in modules:
        source = path.read_text()
        name = path.relative_to(PACKAGE.parent)
        if len(source.splitlines()) >= MAX_MODULE_LINES:
            too_big.append(f"{name}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines >= MAX_FUNCTION_LINES:
                    too_big.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert too_big == []
