"""A tutorial's figures in every language of the site.

A tutorial executes once, in the English pass; the Chinese pass reuses its pages and images.  So the
English pass saves each figure in every language at once:

* :func:`scrape` (sphinx-gallery's ``image_scrapers``): for each open figure that can draw itself in another
  language (``fig._tut_redraw(lang)``, :mod:`npu_tutorials.views.plots`), it draws it in that language and
  saves it beside the English image as ``<english image stem>_<lang>.png`` (the same format, dpi and srcset
  sizes), then hands the English figures to sphinx-gallery's own matplotlib scraper, which writes them and
  the page's rst (English images only);
* :func:`figures_in_language` (Sphinx ``source-read``, the other language's pass): a gallery page's image
  references ``sphx_glr_<stem>_<NNN>.png`` become ``sphx_glr_<stem>_<NNN>_<lang>.png`` where that file
  exists (thumbnails and figures drawn in English only stay).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path, PurePosixPath
from typing import Any

from ..core.messages import LANGS

REDRAW = "_tut_redraw"  # the attribute views.plots sets on a figure: fig._tut_redraw(lang) -> Figure
# an image a gallery page references: ``/tutorials/models/images/sphx_glr_x_001.png`` (image-sg, srcset)
IMAGE = re.compile(r"(?P<path>[^\s,`<>'\"]*sphx_glr_[\w.-]+?)(?P<ext>\.(?:png|jpg|jpeg|svg|gif|webp))(?![\w.-])")


def localized(path: str | Path | PurePosixPath, lang: str) -> str:
    """The image of ``path`` drawn in ``lang``: ``dir/sphx_glr_x_001.png`` -> ``dir/sphx_glr_x_001_zh_CN.png``."""
    path = PurePosixPath(str(path))
    return str(path.with_name(f"{path.stem}_{lang}{path.suffix}"))


def _save_other_languages(fig, image_path: PurePosixPath, gallery_conf: dict[str, Any]) -> None:
    """Draw ``fig`` in every other language and save it as :func:`localized` of each English file."""
    import matplotlib
    import matplotlib.pyplot as plt

    redraw = getattr(fig, REDRAW)
    kwargs = {}
    for attr in ("facecolor", "edgecolor"):  # as sphinx-gallery's matplotlib scraper saves the English one
        if matplotlib.colors.to_rgba(getattr(fig, "get_" + attr)()) != matplotlib.colors.to_rgba(
                matplotlib.rcParams["figure." + attr]):
            kwargs[attr] = getattr(fig, "get_" + attr)()
    for lang in LANGS[1:]:
        other = redraw(lang)
        try:
            dpi0 = matplotlib.rcParams["savefig.dpi"]
            dpi0 = other.dpi if dpi0 == "figure" else dpi0
            paths = [PurePosixPath(localized(image_path, lang))]
            other.savefig(paths[0], **kwargs)
            for mult in gallery_conf.get("image_srcset", ()):  # hidpi copies: <stem>_2_00x.png -> ..._zh_CN
                multst = f"{mult:.2f}".replace(".", "_")
                hi = image_path.with_name(f"{image_path.stem}_{multst}x{image_path.suffix}")
                paths.append(PurePosixPath(localized(hi, lang)))
                other.savefig(paths[-1], **{**kwargs, "dpi": mult * dpi0})
            if "images" in gallery_conf.get("compress_images", ()):
                from sphinx_gallery.utils import optipng

                for p in paths:
                    optipng(Path(p), gallery_conf["compress_images_args"])
        finally:
            plt.close(other)


def scrape(block, block_vars: dict[str, Any], gallery_conf: dict[str, Any]) -> str:
    """sphinx-gallery image scraper: every open figure in each language, then the English ones' rst."""
    import matplotlib.pyplot as plt
    from sphinx_gallery.scrapers import matplotlib_scraper

    paths = block_vars["image_path_iterator"]
    # the paths matplotlib_scraper will give the open figures: the iterator's next ones, in get_fignums() order
    for i, num in enumerate(list(plt.get_fignums())):
        fig = plt.figure(num)
        if getattr(fig, REDRAW, None) is None:
            continue
        image_path = PurePosixPath(paths.image_path.format(len(paths) + 1 + i))
        try:
            _save_other_languages(fig, image_path, gallery_conf)
        except Exception as exc:  # noqa: BLE001 (the English figure still shows, on every page)
            warnings.warn(f"figure {image_path.name}: not drawn in every language ({type(exc).__name__}: {exc})",
                          stacklevel=1)
    return matplotlib_scraper(block, block_vars, gallery_conf)


def figures_in_language(app, docname: str, source: list[str]) -> None:
    """Sphinx ``source-read``, the other language's pass: a gallery page shows the figures drawn in its
    language (the image references whose :func:`localized` file exists)."""
    from .i18n import extracting, page_lang

    lang = page_lang(app)
    if lang == LANGS[0] or extracting(app) or "sphx_glr_" not in source[0]:
        return
    source[0] = localize_images(source[0], lang, Path(app.srcdir), Path(app.srcdir, docname).parent)


def localize_images(text: str, lang: str, srcdir: Path, docdir: Path) -> str:
    """``text`` with each image reference whose ``lang`` file exists pointing at that file (a path starting
    with ``/`` is under ``srcdir``, another one under ``docdir``)."""

    def swap(m: re.Match) -> str:
        path, ext = m["path"], m["ext"]
        if path.endswith(f"_{lang}"):
            return m[0]
        on_disk = srcdir / path.lstrip("/") if path.startswith("/") else docdir / path
        return localized(m[0], lang) if Path(localized(f"{on_disk}{ext}", lang)).is_file() else m[0]

    return IMAGE.sub(swap, text)
