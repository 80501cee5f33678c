"""What the code writes, in every language of the site, through one message catalog.

A view writes ``_("median TTFT")`` or ``_("{n} of {total} positions", n=3, total=40)``.  The result is a
:class:`Text`: a ``str`` that holds the English (so every use of a string keeps working) and also each
other language's rendering, made from that language's catalog: the ``.po`` files of
``npu_tutorials/data/locale/<lang>/LC_MESSAGES/messages/`` (gettext's format, read with babel; one file per
part of the package, one catalog; the ``{fields}`` stay in the translation, in whatever order its grammar
wants them).

A tutorial executes once, in the English pass, and the Chinese pass reuses what it showed, so what a view
shows carries both languages: :func:`html` writes a :class:`Text` as one ``<span lang=…>`` per language and
the site's stylesheet shows the one of the page (``html[lang]``).  Text that each language's pass writes itself
(banners, the landing matrices) takes :meth:`Text.in_` of that pass's language.

* ``N_("...")`` marks a message where it is defined (a check's name, stored in a results document) without
  translating it; ``_(name)`` translates it where it is shown.
* :func:`extract` reads every ``_("...")`` and ``N_("...")`` of the package (a literal first argument), and
  :func:`untranslated` names the ones a catalog lacks; a ``_()`` of a string no catalog has is remembered in
  :data:`MISSED` (the tests render every view of the recorded results and expect none).

Commands, code, model names and numbers are never messages: they read the same in every language.
"""

from __future__ import annotations

import ast
import html as _html
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

LANGS = ("en", "zh_CN")              # the site's languages: the first is the one the code is written in
HTML_LANG = {"en": "en", "zh_CN": "zh-CN"}
PACKAGE = Path(__file__).resolve().parents[1]
LOCALE_DIR = PACKAGE / "data" / "locale"
DOMAIN = "messages"
MISSED: set[str] = set()             # runtime look-ups no catalog answered (English shown in every language)


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


class Text(str):
    """A text in every language of the site; as a ``str``, the English."""

    tr: dict[str, str]

    def __new__(cls, en: str, tr: dict[str, str] | None = None):
        obj = super().__new__(cls, en)
        obj.tr = dict(tr or {})
        return obj

    def in_(self, lang: str) -> str:
        """This text in ``lang`` (the English where ``lang`` is the first language)."""
        return self.tr.get(lang, str(self))

    def __add__(self, other):  # "a" + "b" keeps both languages
        return Text(str(self) + str(other), {lang: self.in_(lang) + in_(other, lang) for lang in LANGS[1:]})

    def __radd__(self, other):
        return Text(str(other) + str(self), {lang: in_(other, lang) + self.in_(lang) for lang in LANGS[1:]})


def in_(value: Any, lang: str) -> str:
    """``value`` as text in ``lang``: a :class:`Text`'s translation, anything else as ``str``."""
    return value.in_(lang) if isinstance(value, Text) else str(value)


def N_(msgid: str) -> str:  # noqa: N802 (gettext's name)
    """Mark ``msgid`` for the catalog; it is translated where it is shown (``_(msgid)``)."""
    return msgid


def _(msgid: str, /, **fields: Any) -> Text:
    """``msgid`` in every language, its ``{fields}`` filled (a :class:`Text` field in the same language)."""
    msgid = str(msgid)
    en = msgid.format(**fields) if fields else msgid
    tr = {}
    for lang in LANGS[1:]:
        found = catalog(lang).get(msgid)
        if found is None:
            MISSED.add(msgid)
        template = found or msgid
        tr[lang] = template.format(**{k: in_(v, lang) if isinstance(v, Text) else v
                                      for k, v in fields.items()}) if fields else template
    return Text(en, tr)


def join(sep: str, parts: Iterable[Any]) -> Text:
    """``sep.join(parts)`` in every language."""
    parts = list(parts)
    return Text(str(sep).join(map(str, parts)),
                {lang: in_(sep, lang).join(in_(p, lang) for p in parts) for lang in LANGS[1:]})


def reread(stored: str, templates: Iterable[str]) -> Text | str:
    """An English sentence a results document stores (made from one of ``templates``, messages marked with
    ``N_()`` where the sentence is made), shown in every language: the first template whose English it is,
    filled with the parts read back from it; the stored sentence as it is when none matches."""
    import re
    import string

    for template in templates:
        pattern, seen = [], set()
        for text, name, _spec, _conv in string.Formatter().parse(template):
            pattern.append(re.escape(text))
            if name:
                pattern.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
                seen.add(name)
        if m := re.fullmatch("".join(pattern), stored, re.S):
            return _(template, **m.groupdict())
    return stored


SENTENCE_GAP = Text(" ", {"zh_CN": ""})  # between two sentences: a space in English, none after Chinese 。


def sentences(parts: Iterable[Any]) -> Text:
    """Sentences one after another, in every language (:data:`SENTENCE_GAP` between them)."""
    return join(SENTENCE_GAP, parts)


def html(value: Any) -> str:
    """Escaped HTML of ``value``: a :class:`Text` that differs between languages as one ``<span lang>`` per
    language (the stylesheet shows the page's), anything else once."""
    if isinstance(value, Text) and any(value.in_(lang) != str(value) for lang in LANGS[1:]):
        return "".join(f'<span class="tut-l10n" lang="{HTML_LANG[lang]}">{_html.escape(in_(value, lang))}</span>'
                       for lang in LANGS)
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
    import string

    def fields(s: str) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(s) if f is not None}

    have = catalog(lang) if translations is None else translations
    return [f"{msgid[:60]!r}: the {lang} text has fields {sorted(fields(t))}, the English {sorted(fields(msgid))}"
            for msgid, t in sorted(have.items()) if fields(t) != fields(msgid)]
