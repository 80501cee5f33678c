"""What the code writes, in every language of the site, through one message catalog.

A view writes ``_("median TTFT")`` or ``_("{n} of {total} positions", n=3, total=40)`` and gets a plain ``str``
in the language being rendered (:func:`language`, a context; English outside one), from that language's
catalog: the ``.po`` files of ``npu_tutorials/data/locale/<lang>/LC_MESSAGES/messages/`` (gettext's format, read
with babel; one file per part of the package, one catalog; the ``{fields}`` stay in the translation, in whatever
order its grammar wants them).

A tutorial executes once and stores what it measured in its results document; each language's Sphinx pass
renders the page's views from that document inside ``language(<the pass's language>)``
(:mod:`npu_tutorials.site.render`), so nothing carries two languages at once.

* ``N_("...")`` marks a message where it is defined (a check's name, a build change stored in a results
  document as a :class:`~npu_tutorials.record.schema_base.Message`) without translating it; ``_(name)``
  translates it where it is shown.
* :func:`extract` reads every ``_("...")`` and ``N_("...")`` of the package (a literal first argument), and
  :func:`untranslated` names the ones a catalog lacks; a ``_()`` of a string some catalog lacks is remembered
  in :data:`MISSED`, whichever language is rendered (the tests render every view of the recorded results and
  expect none).

Commands, code, model names and numbers are never messages: they read the same in every language.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import functools
import html as _html
import inspect
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator
import string

LANGS = ("en", "zh_CN")              # the site's languages: the first is the one the code is written in
HTML_LANG = {"en": "en", "zh_CN": "zh-CN"}
PACKAGE = Path(__file__).resolve().parents[1]
LOCALE_DIR = PACKAGE / "data" / "locale"
DOMAIN = "messages"
MISSED: set[str] = set()             # runtime look-ups no catalog answered (English shown in every language)
_LANG: contextvars.ContextVar[str] = contextvars.ContextVar("tutorial_language", default=LANGS[0])
# punctuation that is not a message: between two sentences, the parts of a list, the items of a summary
SENTENCE_GAP = {"en": " ", "zh_CN": ""}
LIST_SEP = {"en": ", ", "zh_CN": "、"}
CLAUSE_SEP = {"en": "; ", "zh_CN": "；"}


def catalog_path(lang: str) -> Path:
    """The folder of ``lang``'s catalog files."""
    return LOCALE_DIR / lang / "LC_MESSAGES" / DOMAIN


def read_catalog(folder: Path) -> tuple[dict[str, str], list[str]]:
    """msgid -> translation of every ``.po`` file in ``folder`` (untranslated and fuzzy entries left out), and
    one line per message two files translate differently."""
    from babel.messages.pofile import read_po

    out: dict[str, str] = {}
    where: dict[str, str] = {}
    clashes = []
    for path in sorted(Path(folder).glob("*.po")):
        with open(path, "rb") as f:
            for m in read_po(f):
                if not (m.id and m.string and not m.fuzzy):
                    continue
                if m.id in out and out[m.id] != m.string:
                    clashes.append(f"{m.id[:60]!r}: {where[m.id]} and {path.name} translate it differently")
                out.setdefault(m.id, m.string)
                where.setdefault(m.id, path.name)
    return out, clashes


@lru_cache(maxsize=None)
def catalog(lang: str) -> dict[str, str]:
    """msgid -> translation in ``lang``'s catalog."""
    return read_catalog(catalog_path(lang))[0]


def current() -> str:
    """The language being rendered (the first one outside :func:`language`)."""
    return _LANG.get()


@contextlib.contextmanager
def language(lang: str) -> Iterator[str]:
    """Render in ``lang`` inside this block: every ``_()`` answers in it."""
    if lang not in LANGS:
        raise ValueError(f"no language {lang!r}; the site's are {', '.join(LANGS)}")
    token = _LANG.set(lang)
    try:
        yield lang
    finally:
        _LANG.reset(token)


def in_lang(fn):
    """Decorate ``fn(..., lang=...)``: its body renders in the ``lang`` it is given (the language being
    rendered where it is given none)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def rendered(*args, **kwargs):
        lang = signature.bind(*args, **kwargs).arguments.get("lang") or current()
        with language(lang):
            return fn(*args, **kwargs)

    return rendered


def N_(msgid: str) -> str:  # noqa: N802 (gettext's name)
    """Mark ``msgid`` for the catalog; it is translated where it is shown (``_(msgid)``)."""
    return msgid


def _(msgid: str, /, **fields: Any) -> str:
    """``msgid`` in the language being rendered, its ``{fields}`` filled."""
    msgid = str(msgid)
    lang = current()
    for other in LANGS[1:]:  # every catalog is asked, so an English rendering finds a missing translation too
        if msgid not in catalog(other):
            MISSED.add(msgid)
    template = msgid if lang == LANGS[0] else catalog(lang).get(msgid) or msgid
    return template.format(**fields) if fields else template


def gap() -> str:
    """What stands between two sentences in the language being rendered."""
    return SENTENCE_GAP[current()]


def sentences(parts: Iterable[Any]) -> str:
    """Sentences one after another (:data:`SENTENCE_GAP` of the language between them)."""
    return SENTENCE_GAP[current()].join(str(p) for p in parts)


def listed(parts: Iterable[Any]) -> str:
    """The parts of a list, as the language writes one (:data:`LIST_SEP`)."""
    return LIST_SEP[current()].join(str(p) for p in parts)


def html(value: Any) -> str:
    """Escaped HTML of ``value``."""
    return _html.escape(str(value))


# -- the catalog check ----------------------------------------------------------------------
def extract(root: Path = PACKAGE) -> dict[str, list[str]]:
    """Every message the package marks: msgid -> the places (``module.py:line``) that write it."""
    out: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("_", "N_")
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                out.setdefault(node.args[0].value, []).append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return out


def untranslated(lang: str, messages: dict[str, list[str]] | None = None,
                 translations: dict[str, str] | None = None) -> list[str]:
    """One line per marked message that ``lang``'s catalog does not translate (or marks fuzzy)."""
    messages = extract() if messages is None else messages
    have = catalog(lang) if translations is None else translations
    return [f"{places[0]}: {msgid[:80]!r} has no {lang} translation in {catalog_path(lang).relative_to(PACKAGE.parent)}"
            for msgid, places in sorted(messages.items()) if msgid not in have]


def bad_fields(lang: str, translations: dict[str, str] | None = None) -> list[str]:
    """One line per translation whose ``{fields}`` differ from its English's (it would not fill)."""
    def fields(s: str) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(s) if f is not None}

    have = catalog(lang) if translations is None else translations
    return [f"{msgid[:60]!r}: the {lang} text has fields {sorted(fields(t))}, the English {sorted(fields(msgid))}"
            for msgid, t in sorted(have.items()) if fields(t) != fields(msgid)]
