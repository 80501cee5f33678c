"""Each language's pass draws a tutorial page's tables and figures from its results document.

An executed page holds, where a cell showed a view, a reference to it (:mod:`npu_tutorials.views.refs`).  When
Sphinx reads the page (``source-read``, in every language's pass) :func:`render_views` replaces each reference
with the view drawn from the model's results document (``_build/results/<model>.json``) and its card, with the
model's recorded documents handed to the views, in the pass's language:

* a table: its HTML, in place, and under it a link to the rows it shows as CSV (written into the pass's ``_data/``)
  and the identifier of the document it was drawn from;
* a verdict, a note, a collapsed block: its HTML, in place;
* a figure: a PNG written into the pass's ``_images/`` (named by its content), shown by an ``<img>``, with the
  identifier of its document under it.

A view that cannot be drawn (no document, a section missing) shows one line saying why
(``tut-render-error``: ``make check`` fails the page) and warns.

:func:`rerender_outdated` (``env-get-outdated``) re-reads a page whose drawing changed without its executed
page changing: its document, its card, the views' code or a message catalog.  So a view edit re-renders both
languages, and executes nothing (:func:`npu_tutorials.site.rerun.inputs_digest` leaves views out).
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import re
from pathlib import Path
from typing import Any

from ..core.errors import TutorialError
from ..core.messages import LOCALE_DIR, _, language
from ..core.tables import Table, Verdict
from ..views.refs import MARK, parse, resolve
from ..inputs import cards
from ..inputs.cards import load_card
from ..inputs.gallery_index import tutorials
from ..record.results import document_id, recorded_dir, results_dir
from ..views import Views, figure_data
from ..views.deploy import collect_env_block
from ..engine.deploy import LABELS
from . import code_graph
from .i18n import extracting, page_lang
from ..record.results import read_doc, recorded

PLACEHOLDER = re.compile(rf'^(?P<indent>[ \t]*)(?P<before>.*?)<div class="{MARK}" data-tut-view="(?P<ref>[^"]*)"></div>',
                         re.M)
ERROR_MARK = "tut-render-error"
DATA_MARK = "tut-data"  # under a table or a figure: the CSV of its rows and its document
PACKAGE = Path(__file__).resolve().parents[1]
# what draws a tutorial's page from its document: this module's views and the banners (code_graph.reached from them)
DRAWING_ROOTS = ["npu_tutorials.site.render", "npu_tutorials.site.banners"]
STAMP = "tut-render-{stem}.digest"  # in the pass's doctree folder: the drawing digest a page was last read with


def _documents(model: str, record: str = "") -> tuple[Any, Any, list, str]:
    """(the document to draw, the card, the other recorded documents, the document's identifier) of ``model``:
    this build's document, or for a page this build did not execute the recorded one ``record``
    (``<model>/<file>.json`` under ``results/``)."""
    if record:
        doc = read_doc(recorded_dir() / record)
        return (doc, load_card(model), [d for d in recorded(model, superseded=True)
                                        if d.provenance.built_at != doc.provenance.built_at],
                document_id(recorded_dir() / record))
    path = results_dir() / f"{model}.json"
    if not path.is_file():
        raise TutorialError(f"no results document {path} to draw the page from (the tutorial wrote none)")
    return read_doc(path), load_card(model), recorded(model, superseded=True), document_id(path)


def keep(folder: Path, stem: str, data: bytes, suffix: str, digits: int) -> str:
    """``data`` written once into ``folder`` under ``stem`` and the first ``digits`` hex digits of its SHA-256 (the
    same bytes, the same name, in every pass); returns the file's name."""
    file = f"{stem}_{hashlib.sha256(data).hexdigest()[:digits]}{suffix}"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / file).is_file():
        (folder / file).write_bytes(data)
    return file


def table_csv(table, data: Path, prefix: str, name: str, doc_id: str = "") -> str:
    """``table``'s columns and the rows it shows, as a CSV file in ``data`` (named by the view, the document and its
    bytes), and the link a page at ``prefix`` shows under the table, naming the document (``doc_id``; none for a
    view of several documents, whose rows name them)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows(table.cells())
    file = keep(data, f"tut_{name}" + (f"_{doc_id}" if doc_id else ""), buf.getvalue().encode("utf-8"), ".csv", 8)
    return (f'<p class="{DATA_MARK}"><a href="{prefix}_data/{file}" download>{html.escape(_("Download as CSV"))}</a>'
            + (f" · {source_line(doc_id)}" if doc_id else "") + "</p>")


def source_line(doc_id: str) -> str:
    return html.escape(_("from document {id}", id=doc_id))


def table_block(table, images: Path, prefix: str, name: str, doc_id: str = "") -> str:
    """A :class:`Table` or :class:`Verdict` as a page shows it: the table and, under it, its CSV and document."""
    return table._repr_html_() + table_csv(table if isinstance(table, Table) else table.table(), images.parent / "_data",
                                           prefix, name, doc_id)


def figure_block(fig, images: Path, prefix: str, name: str, doc_id: str = "") -> str:
    """A figure as a page shows it: the image and, under it, the CSV of the rows it draws (:mod:`..views.figure_data`)
    and its document."""
    rows = figure_data.of(fig)
    return figure_html(fig, images, prefix, name) + (
        table_csv(rows, images.parent / "_data", prefix, name, doc_id) if rows is not None
        else f'<p class="{DATA_MARK}">{source_line(doc_id)}</p>' if doc_id else "")


def figure_html(fig, images: Path, prefix: str, name: str) -> str:
    """``fig`` saved as a PNG in ``images`` (named by its bytes), as the ``<img>`` a page at ``prefix`` shows."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=100)
    finally:
        plt.close(fig)
    file = keep(images, f"tut_{name}", buf.getvalue(), ".png", 16)
    return (f'<img alt="{html.escape(name)}" class="sphx-glr-single-img tut-figure" '
            f'src="{prefix}_images/{file}" />')


def draw(ref: dict, lang: str, images: Path, prefix: str, cache: dict | None = None) -> str:
    """The HTML of one view reference, drawn in ``lang`` from its model's documents."""
    cache = {} if cache is None else cache
    model, record = ref["model"], ref.get("doc", "")
    if (model, record) not in cache:
        cache[model, record] = _documents(model, record)
    doc, card, recorded, doc_id = cache[model, record]
    name = f"{model}_{ref['view'].replace('.', '_')}_{lang}"
    with language(lang):
        value = resolve(Views(doc, card, recorded), ref["view"])(*ref.get("args", []), **ref.get("kwargs", {}))
        if hasattr(value, "savefig"):
            return figure_block(value, images, prefix, name, doc_id)
        if isinstance(value, (Table, Verdict)):
            return table_block(value, images, prefix, name, doc_id)
        if hasattr(value, "_repr_html_"):
            return value._repr_html_()
        return f"<pre>{html.escape(str(value))}</pre>"


def render_text(text: str, lang: str, images: Path, prefix: str, on_error=None) -> str:
    """``text`` (an executed page's reST) with every view reference drawn; ``on_error(message)`` for each
    reference that cannot be drawn (shown in its place as one line)."""
    cache: dict = {}

    def one(m: re.Match) -> str:
        try:
            out = draw(parse(m["ref"]), lang, images, prefix, cache)
        except TutorialError as exc:
            if on_error is not None:
                on_error(str(exc))
            with language(lang):
                note = _("This view could not be drawn from the results document: {why}", why=str(exc))
            out = f'<p class="{ERROR_MARK}">{html.escape(note)}</p>'
        indent = m["indent"]
        return indent + m["before"] + out.replace("\n", "\n" + indent)

    return PLACEHOLDER.sub(one, text)


def render_views(app, docname: str, source: list[str]) -> None:
    """Sphinx ``source-read``: draw the view references of a tutorial page in the pass's language."""
    from sphinx.util import logging

    if f'class="{MARK}"' not in source[0] or extracting(app):
        return
    log = logging.getLogger(__name__)
    depth = docname.count("/")
    source[0] = render_text(source[0], page_lang(app), Path(app.outdir) / "_images", "../" * depth,
                            on_error=lambda why: log.warning(f"{docname}: {why}"))
    stem = docname.rsplit("/", 1)[-1]
    (Path(app.doctreedir) / STAMP.format(stem=stem)).parent.mkdir(parents=True, exist_ok=True)
    (Path(app.doctreedir) / STAMP.format(stem=stem)).write_text(drawing_digest(stem, app.srcdir) + "\n")


COLLECT_ENV = re.compile(r'^(?P<indent>[ \t]*)<div class="tut-collect-env" data-backend="(?P<backend>[a-z]+)"></div>', re.M)


def collect_env_marker(backend: str) -> str:
    """What a "Deploy it yourself" tab holds (in a raw HTML block) until :func:`render_included` draws its
    ``vllm collect-env`` report."""
    return f'<div class="tut-collect-env" data-backend="{backend}"></div>'


def render_included(app, relative_path, parent_docname: str, content: list[str]) -> None:
    """Sphinx ``include-read``: a model's "Deploy it yourself" section (``_generated/<model>/deploy.rst``) gets
    each tab's ``vllm collect-env`` report, drawn in the pass's language from this build's document and the
    recorded ones (:func:`npu_tutorials.views.deploy.collect_env_block`)."""
    from sphinx.util import logging

    if "tut-collect-env" not in content[0] or extracting(app):
        return
    model = Path(relative_path).parent.name
    docs: list = []
    mine = results_dir() / f"{model}.json"
    try:
        docs = ([read_doc(mine)] if mine.is_file() else []) + recorded(model)
    except TutorialError as exc:
        logging.getLogger(__name__).warning(f"{parent_docname}: {exc}")
    content[0] = collect_env_text(content[0], docs, page_lang(app))


def collect_env_text(text: str, docs: list, lang: str) -> str:
    """``text`` with each tab's marker (:func:`collect_env_marker`) replaced by its report's HTML."""
    def one(m: re.Match) -> str:
        with language(lang):
            value = collect_env_block(docs, m["backend"], LABELS[m["backend"]])
        out = value._repr_html_() if hasattr(value, "_repr_html_") else value
        return m["indent"] + out.replace("\n", "\n" + m["indent"])

    return COLLECT_ENV.sub(one, text)


def drawing_digest(stem: str, srcdir: str | Path | None = None, package: Path = PACKAGE) -> str:
    """Hash of what a page's drawing reads besides its executed page: its results document and recorded
    documents, its card, the drawing code (the modules :data:`DRAWING_ROOTS` reach in ``package``) and the message
    catalogs, and (``srcdir``: the pages' source folder) why this build did not execute it (its ``.skipped`` note,
    which a page drawn from a record says)."""
    key = tutorials().get(stem, stem)
    files = code_graph.reached(package, DRAWING_ROOTS)
    files += sorted(LOCALE_DIR.rglob("*.po"))
    files += [cards.CARDS_DIR / f"{key}.yaml", results_dir() / f"{key}.json"]
    files += sorted((recorded_dir() / key).glob("*.json"))
    if srcdir is not None:
        files.append(Path(srcdir) / "tutorials" / "models" / f"{stem}.skipped")
    h = hashlib.sha256()
    for f in files:
        h.update(str(f).encode() + b"\0" + (f.read_bytes() if f.is_file() else b"-"))
    return h.hexdigest()


def rerender_outdated(app, env, added, changed, removed) -> list[str]:
    """Sphinx ``env-get-outdated``: the tutorial pages whose drawing changed since the pass last read them
    (:func:`drawing_digest`), though their executed page did not."""
    out = []
    for stem in tutorials():
        docname = f"tutorials/models/{stem}"
        if docname not in env.found_docs or docname in added or docname in changed:
            continue
        stamp = Path(app.doctreedir) / STAMP.format(stem=stem)
        if not stamp.is_file() or stamp.read_text().strip() != drawing_digest(stem, app.srcdir):
            out.append(docname)
    return out
