"""mkdocs hooks: a public name without a docstring fails the (strict) build.

Every object a reference page documents with ``::: dotted.path`` is loaded with griffe (the
same static loader mkdocstrings uses); the object, and for a class or module each public
function, method, property and class it defines, must have a docstring. Each missing one
is logged as a warning, which ``mkdocs build --strict`` turns into a failure. Attributes
(fields, constants, enum members) are not required to have one.
"""

from __future__ import annotations

import logging
import pathlib
import re
from typing import Any

log = logging.getLogger("mkdocs.hooks.exon_docstrings")

_IDENT = re.compile(r"^::: ([\w.]+)", re.MULTILINE)
_KINDS = {"class", "function", "module"}


def _documented(docs_dir: pathlib.Path) -> list[str]:
    found: list[str] = []
    for page in sorted((docs_dir / "reference").glob("*.md")):
        found += _IDENT.findall(page.read_text())
    return found


def _public_members(obj: Any) -> list[Any]:
    members = []
    exported = getattr(obj, "exports", None) if obj.kind.value == "module" else None
    for name, member in obj.members.items():
        if name.startswith("_") or member.is_alias:
            continue
        if exported is not None and name not in exported:
            continue
        kind = member.kind.value
        if kind in _KINDS or (kind == "attribute" and "property" in member.labels):
            members.append(member)
    return members


def missing_docstrings(idents: list[str], search_path: str = ".") -> list[str]:
    """Dotted paths of the documented public objects that have no docstring."""
    import griffe

    packages: dict[str, Any] = {}
    missing: list[str] = []
    seen: set[str] = set()

    def check(obj: Any, recurse: bool) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is None or not obj.docstring.value.strip():
            missing.append(obj.path)
        if recurse:
            for member in _public_members(obj):
                check(member, recurse=member.kind.value == "class")

    for ident in idents:
        top = ident.split(".")[0]
        if top not in packages:
            packages[top] = griffe.load(top, search_paths=[search_path],
                                        allow_inspection=False)
        obj = packages[top]
        for part in ident.split(".")[1:]:
            obj = obj.members[part]
        if obj.is_alias:
            obj = obj.final_target
        check(obj, recurse=obj.kind.value in ("class", "module") and ident != top
              and not ident.endswith(".archive"))
    return missing


def on_pre_build(config: Any) -> None:
    docs_dir = pathlib.Path(config["docs_dir"])
    root = str(pathlib.Path(__file__).resolve().parents[1])  # the repository with exon/
    for path in missing_docstrings(_documented(docs_dir), root):
        log.warning("public name without a docstring: %s", path)
