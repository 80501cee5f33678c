"""The package's layers hold: read every module's imports (statically, with ``ast``) and fail on an import
cycle between modules, on a layer importing a higher one, and on a module importing another module's
private (``_name``) names (``_`` itself is gettext's public name for translating a message).  Also: no module over 400 lines.

The layers, lowest first (``npu_tutorials/__init__.py`` and the contributing page say the same; a test
below holds the page to the package's folders)::

    core -> inputs -> engine -> record -> measure -> checks -> views -> tutorial -> site -> cli

A module may import its own layer and the ones before it.  Imports under ``if TYPE_CHECKING:`` never run,
so they count for the layers but not for cycles.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "npu_tutorials"
CONTRIBUTING = PKG.parents[1] / "docs" / "source" / "contributing.md"
LAYERS = ["core", "inputs", "engine", "record", "measure", "checks", "views", "tutorial", "site", "cli"]
MAX_LINES = 400


def _name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PKG.rglob("*.py"))}


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:  # the package itself: it re-exports the error type, nothing else
        return 0
    assert parts[1] in LAYERS, f"{module}: not in a layer subpackage (add it to one of {LAYERS})"
    return LAYERS.index(parts[1])


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, sub.end_lineno + 1))
    return lines


def imports(module: str) -> list[tuple[str, str | None, int, bool]]:
    """(imported module, name imported from it or None, line, whether it runs) for each import in ``module``
    of a module of this package."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    typing_only = _type_checking_lines(tree)
    out = []
    for node in ast.walk(tree):
        runs = node_lineno(node) not in typing_only
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno, runs) for a in node.names if a.name in MODULES]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target not in MODULES:
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((sub, None, node.lineno, runs) if sub in MODULES else (target, a.name, node.lineno, runs))
    return out


def node_lineno(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


def graph(runtime_only: bool = True) -> dict[str, set[str]]:
    return {m: {t for t, _, _, runs in imports(m) if t != m and (runs or not runtime_only)} for m in MODULES}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_every_module_is_in_a_layer():
    for m in MODULES:
        layer(m)


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_no_layer_imports_a_higher_one():
    upward = [f"{m} ({LAYERS[layer(m)]}) imports {t} ({LAYERS[layer(t)]}) at line {line}"
              for m in MODULES for t, _, line, _ in imports(m) if layer(t) > layer(m)]
    assert upward == []


def test_no_module_imports_another_modules_private_names():
    private = []
    for m in MODULES:
        for t, name, line, _ in imports(m):
            # ``_``: gettext's name for the message catalog's translate (npu_tutorials.core.messages), public by convention
            if t != m and name is not None and name.startswith("_") and not name.startswith("__") and name != "_":
                private.append(f"{m}:{line} imports {t}.{name}")
        # a private name reached through an imported module: ``from . import x`` ... ``x._helper``
        tree = ast.parse(MODULES[m].read_text())
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    aliases[a.asname or a.name] = a.name
        modules_bound = {alias for alias, name in aliases.items()
                         if any(t.endswith("." + name) for t, n, _, _ in imports(m) if n is None)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in modules_bound and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                private.append(f"{m}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert private == []


def test_no_module_over_400_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_walk_finds_what_it_should(tmp_path, monkeypatch):
    """The checks are not vacuous: a planted cycle, upward import and private import are all found."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert "npu_tutorials.engine.server" in graph()["npu_tutorials.engine.bench"]
    assert layer("npu_tutorials.site.pages") > layer("npu_tutorials.views.base") > layer("npu_tutorials.core.errors")


def page_layers(text: str) -> dict[str, str]:
    """The contributing page's list of the layers ("How the package is laid out", a text block of one entry
    per layer, its continuation lines indented): layer -> its entry."""
    block = text.split("## How the package is laid out", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    out: dict[str, str] = {}
    name = None
    for line in block.splitlines():
        if line.strip() and not line[0].isspace():
            name = line.split()[0]
            out[name] = ""
        if name is not None:
            out[name] += line + "\n"
    return out


def page_problems(text: str, pkg: Path = PKG) -> list[str]:
    """What the page's list gets wrong about ``pkg``: a layer (subpackage) it leaves out, one it names that is
    not there or out of the layers' order, a data folder (``cards/``, ``data/``) it does not name, a folder or a
    module it names that does not exist."""
    layers = page_layers(text)
    folders = {p.name for p in pkg.iterdir() if p.is_dir() and p.name != "__pycache__"}
    subpackages = {f for f in folders if (pkg / f / "__init__.py").is_file()}
    out = [f"layer {f}/ is not on the page" for f in sorted(subpackages - set(layers))]
    out += [f"the page names a layer {f}/ that the package lacks" for f in layers if f not in subpackages]
    if not out and list(layers) != LAYERS:
        out.append(f"the page's order {list(layers)} is not the layers' {LAYERS}")
    named = set(re.findall(r"(\w+)/", "".join(layers.values())))
    out += [f"the page names a folder {f}/ that the package lacks" for f in sorted(named - folders)]
    out += [f"folder {f}/ is not on the page" for f in sorted(folders - subpackages - named)]
    out += [f"the page names {layer}/{m}, which does not exist" for layer, entry in layers.items() if layer in subpackages
            for m in re.findall(r"\b\w+\.py\b", entry) if not (pkg / layer / m).is_file()]
    return out


def test_the_contributing_page_lists_the_packages_folders_in_the_layers_order():
    assert page_problems(CONTRIBUTING.read_text()) == []


def test_the_page_check_finds_a_missing_and_an_invented_folder():
    """Not vacuous: a layer left off the page, one the package lacks, the layers out of order, an unnamed data
    folder and a stale module name are each one line."""
    text = CONTRIBUTING.read_text()
    assert page_problems(text.replace("\ncli ", "\nclx ")) == [
        "layer cli/ is not on the page", "the page names a layer clx/ that the package lacks"]
    cli = page_layers(text)["cli"]
    first = text.replace(cli, "").replace("```text\n", "```text\n" + cli, 1)
    assert [p.split(" [")[0] for p in page_problems(first)] == ["the page's order"]
    assert page_problems(text.replace("(cards/*.yaml, data/)", "(data/)")) == ["folder cards/ is not on the page"]
    assert page_problems(text.replace("floor.py,", "floor.py, gone.py, old/,")) == [
        "the page names a folder old/ that the package lacks", "the page names measure/gone.py, which does not exist"]


# Modules a function may import where it uses them: heavy to import (seconds, or an accelerator's runtime), or
# optional (absent from some builds).  Everything else is imported at the module's top.
HEAVY = {"torch", "torch_npu", "transformers", "vllm", "safetensors", "tokenizers", "huggingface_hub", "modelscope",
         "matplotlib", "numpy", "sphinx", "sphinx_gallery", "babel", "datasets"}
# Functions whose source a recorded result digests (checks.controls.check_digest: the negative-control ladders,
# a 36-minute re-run for the real SmolLM2 ladder); they keep their imports until those records are measured again.
DIGESTED = {("npu_tutorials.checks.controls", "import re")}


def test_imports_stand_at_the_top_unless_heavy():
    """A module imports what it needs at its top; an import inside a function is of a heavy or optional module
    (:data:`HEAVY`), under ``try`` (an optional one), or in a function a record digests (:data:`DIGESTED`)
    (issue 38: 161 function-level imports, none of them needed to break a cycle)."""
    found = []
    for module, path in MODULES.items():
        text = path.read_text()
        lines, tree = text.splitlines(), ast.parse(text)
        in_try = {id(x) for node in ast.walk(tree) if isinstance(node, ast.Try) for x in ast.walk(node)}
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in in_try:
                    continue
                top = (node.names[0].name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
                line = lines[node.lineno - 1].strip()
                if (isinstance(node, ast.ImportFrom) and node.level) or top not in HEAVY:
                    if (module, line) not in DIGESTED:
                        found.append(f"{module}:{node.lineno}: {line}")
    assert found == [], "import these at the module's top:\n" + "\n".join(found)


def test_only_the_platform_and_the_detection_tell_backends_apart_by_name():
    """Issue 38: a backend is a :class:`~npu_tutorials.engine.platform.Platform`; outside ``engine/platform.py``
    and the detection (``engine/backend.py``) no module compares a backend to a string."""
    pattern = re.compile(r"""backend *(==|!=|in) *["'(]|(==|!=|in) *\(?["'](npu|cpu|cuda)["']""")
    allowed = {"npu_tutorials.engine.platform", "npu_tutorials.engine.backend"}
    found = [f"{m}:{i}: {line.strip()}" for m, path in MODULES.items() if m not in allowed
             for i, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == [], "ask the platform (engine.platform.platform_for(name).accelerator, ...):\n" + "\n".join(found)


def test_every_module_a_tutorial_runs_is_hashed_for_its_rerun():
    """A tutorial re-runs when a module that shapes what it measures changes (``site.rerun.measuring_files``,
    derived by ``site.code_graph``; this test's own import graph checks it).  Every module that the modules the
    gallery scripts import reach by their runtime imports, other than through the drawing modules (views and the
    message catalog, drawn at page-build time), is among them: an edit to ``checks/e2e.py``, which writes the e2e
    config at execution, once neither re-ran nor re-rendered its page."""
    from npu_tutorials.site import rerun

    drawing = ("npu_tutorials.views", "npu_tutorials.core.messages", "npu_tutorials.core.tables")
    g = graph()
    todo = sorted({node.module for p in (PKG.parents[1] / "gallery").glob("*.py")
                   for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.ImportFrom)
                   and (node.module or "").startswith("npu_tutorials")})
    assert todo == ["npu_tutorials.tutorial"]
    reached: set[str] = set()
    while todo:
        m = todo.pop()
        if m in reached or m.startswith(drawing):
            continue
        reached.add(m)
        todo += g[m]
    measuring = {p.relative_to(PKG).as_posix() for p in rerun.measuring_files()}
    ran = {MODULES[m].relative_to(PKG).as_posix() for m in reached}
    assert "checks/e2e.py" in ran and "tutorial/facade.py" in ran
    assert sorted(ran - measuring) == [], sorted(ran - measuring)
