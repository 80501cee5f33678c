"""The results document's reference page, generated from the models (``docs/source/results-schema.md``)."""

from __future__ import annotations

from pydantic import BaseModel
import typing

from .schema import SCHEMA_VERSION, ResultsDoc


def schema_markdown() -> str:
    """The results document's reference, generated from the models above (for the site)."""
    def tname(ann) -> str:
        origin = typing.get_origin(ann)
        if origin is None:
            return getattr(ann, "__name__", str(ann)).replace("NoneType", "null")
        args = typing.get_args(ann)
        if origin is typing.Literal:
            return " \\| ".join(repr(a) for a in args)
        if origin in (list,):
            return f"list of {tname(args[0])}"
        if origin in (dict,):
            return f"map {tname(args[0])} → {tname(args[1])}"
        return " \\| ".join(tname(a) for a in args)

    seen, order = set(), []

    def walk(model):
        if model in seen:
            return
        seen.add(model)
        order.append(model)
        for f in model.model_fields.values():
            for a in [f.annotation, *typing.get_args(f.annotation)] + [
                    x for a in typing.get_args(f.annotation) for x in typing.get_args(a)]:
                if isinstance(a, type) and issubclass(a, BaseModel):
                    walk(a)

    walk(ResultsDoc)
    out = [f"Schema version {SCHEMA_VERSION}.  A type named in a row has its own table below.\n"]
    for model in order:
        out.append(f"### {model.__name__}\n")
        doc = " ".join((model.__doc__ or "").strip().split("\n\n")[0].split())
        if doc and not doc.startswith("Usage docs"):
            out.append(doc + "\n")
        out.append("| field | type | required | description |\n|---|---|---|---|")
        for name, f in model.model_fields.items():
            shown = f.alias or name
            out.append(f"| `{shown}` | {tname(f.annotation)} | {'yes' if f.is_required() else 'no'} | "
                       f"{(f.description or '').replace('|', '/')} |")
        out.append("")
    return "\n".join(out)
