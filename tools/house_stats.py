"""The size of the house: file counts and the longest functions of exon/, as JSON.

    python tools/house_stats.py [ROOT]

Python functions are measured with ``ast`` (``end_lineno - lineno + 1``); C functions by
their body, from a ``{`` alone at column 0 to the next ``}`` alone at column 0 (the house
style: the opening brace of a function on its own line). Issue #26 reports these before
and after its redesign.
"""

from __future__ import annotations

import ast
import json
import pathlib
import sys


def python_functions(path: pathlib.Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = node.end_lineno or node.lineno
            found.append((end - node.lineno + 1, f"{path}:{node.lineno} {node.name}"))
    return found


def c_functions(path: pathlib.Path) -> list[tuple[int, str]]:
    lines = path.read_text(errors="replace").splitlines()
    found: list[tuple[int, str]] = []
    start: int | None = None
    for number, line in enumerate(lines, 1):
        if line == "{" and start is None:
            start = number
        elif line.startswith("}") and start is not None:
            head = next((lines[i].strip() for i in range(start - 2, max(start - 6, -1), -1)
                         if "(" in lines[i]), "?")
            found.append((number - start + 2, f"{path}:{start - 1} {head[:60]}"))
            start = None
    return found


def main(root: pathlib.Path) -> dict[str, object]:
    package = root / "exon"
    py = sorted(p for p in package.rglob("*.py"))
    c = sorted(p for p in package.rglob("*.c"))
    h = sorted(p for p in package.rglob("*.h"))
    py_funcs = sorted((f for p in py for f in python_functions(p)), reverse=True)
    c_funcs = sorted((f for p in c for f in c_functions(p)), reverse=True)
    rel = lambda s: s.replace(str(root) + "/", "")  # noqa: E731
    return {
        "python_files": len(py),
        "c_files": len(c),
        "h_files": len(h),
        "python_lines": sum(len(p.read_text().splitlines()) for p in py),
        "c_lines": sum(len(p.read_text(errors="replace").splitlines()) for p in c + h),
        "longest_python": [[n, rel(s)] for n, s in py_funcs[:5]],
        "longest_c": [[n, rel(s)] for n, s in c_funcs[:5]],
    }


if __name__ == "__main__":
    print(json.dumps(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()),
                     indent=1))
