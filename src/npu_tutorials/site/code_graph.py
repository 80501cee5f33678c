"""The package's import graph, read from its source: what a tutorial's run reaches (a change re-runs it,
:func:`npu_tutorials.site.rerun.measuring_files`) and what a page's drawing reaches (a change re-renders it,
:func:`npu_tutorials.site.render.drawing_digest`) are derived from it, not listed by hand.

An edge is a runtime import of a module of the package (at a module's top or inside a function; not under
``if TYPE_CHECKING``), or a module named by a string (the ``-m`` operand of ``python -m npu_tutorials.engine.isolated``,
a line of a ``-c`` snippet that imports one; docstrings and prose name modules too, and are not edges): what a subprocess of the run executes.  Importing a module runs its packages'
``__init__`` too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

# a string that is a module's name (an argv's ``-m`` operand) or a line of code importing one (a ``-c`` snippet)
NAMED = re.compile(r"^(?:\s*(?:from|import)\s+)?(npu_tutorials(?:\.\w+)*)(?:\s+import\b.*)?$", re.M)


def modules(package: Path) -> dict[str, Path]:
    """Every module of the package under ``package``, by dotted name."""
    out = {}
    for p in sorted(package.rglob("*.py")):
        parts = [package.name, *p.relative_to(package).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _typing_only(tree: ast.AST) -> set[int]:
    return {n.lineno for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for sub in node.body for n in ast.walk(sub) if hasattr(n, "lineno")}


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of the package that ``name`` (at ``path``) runs: what it imports, and what its strings name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    skip = _typing_only(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", 0) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here.split(".")[: len(here.split(".")) - node.level + 1]) if node.level else ""
            target = ".".join(filter(None, [base, node.module or ""]))
            out |= {target, *(f"{target}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out |= set(NAMED.findall(node.value))
    parents = {".".join(m.split(".")[:i]) for m in out for i in range(1, m.count(".") + 1)}
    return {m for m in out | parents if m in known and m != name}


def reached(package: Path, roots: list[str], stop: tuple[str, ...] = ()) -> list[Path]:
    """The files of the modules ``roots`` reach by :func:`imports`, never entering a module under ``stop``
    (dotted prefixes)."""
    known = modules(package)
    seen: set[str] = set()
    todo = [r for r in roots if r in known]
    while todo:
        m = todo.pop()
        if m in seen or m.startswith(stop):
            continue
        seen.add(m)
        todo += imports(m, known[m], known)
    return sorted(known[m] for m in seen)
