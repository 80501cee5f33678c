"""A tutorial that fails ends on its own cause: one line in the results document, on the page and at the end of
``make html``, and no traceback for an expected failure.

sphinx-gallery formats every exception a cell raises as a traceback (``sphinx_gallery.gen_rst.
handle_exception``): it logs it, shows it on the page and repeats it in its closing summary.  For a
:class:`~npu_tutorials.core.errors.TutorialError`, a failure with a message meant for the reader (a server
that died, a missing weights path), that traceback says nothing the message does not, and its last line is
not the cause when the message quotes a log.  :func:`install` wraps ``handle_exception`` (sphinx-gallery
1.x: ``execute_code_block`` calls it by its module name) so that

* the failed run's results document says why (:func:`~npu_tutorials.core.errors.one_line`: the message's first
  line, or the exception's type and first line), so ``make html``'s closing check quotes the tutorial's own error;
* a ``TutorialError`` is logged once as its message, shown on the page as its message, in a block
  marked ``FAILED_MARK`` (site_check reads it), with no traceback, and named in the closing summary in one line;
* any other exception keeps sphinx-gallery's traceback, logged and shown once: the closing summary
  repeats only its one line.
"""

from __future__ import annotations

import os
import sys

from ..core.errors import FAILED_MARK, TutorialError, one_line


def handle_exception(original, exc_info, src_file, script_vars, gallery_conf) -> str:
    """``gen_rst.handle_exception`` with the failure's cause recorded, and a ``TutorialError`` as its message."""
    from sphinx.util import logging as sphinx_logging
    from sphinx_gallery.gen_rst import codestr2rst

    etype, exc, _tb = exc_info
    why = one_line(exc) if exc is not None else "the tutorial failed"
    if "npu_tutorials.tutorial.facade" in sys.modules:
        sys.modules["npu_tutorials.tutorial.facade"].note_failure(why)
    if not isinstance(exc, TutorialError):
        rst = original(exc_info, src_file, script_vars, gallery_conf)  # logs and shows the traceback once
        script_vars["formatted_exception"] = why  # ... and the closing summary names it in one line
        return rst
    message = f"{etype.__name__}: {exc}"
    rel = os.path.relpath(src_file, gallery_conf["src_dir"])
    sphinx_logging.getLogger("sphinx_gallery.gen_rst").warning(
        "\n%s failed: %s", rel, message, type="sphinx-gallery", subtype="example_error")
    if gallery_conf["abort_on_example_error"]:
        raise exc
    script_vars["formatted_exception"] = why  # the closing summary: one line
    script_vars["execute_script"] = False
    return f".. rst-class:: sphx-glr-script-out {FAILED_MARK}\n\n" + codestr2rst(message, lang="text")


def install() -> None:
    """Wrap sphinx-gallery's ``handle_exception`` in this process (idempotent: a worker process of a parallel
    build installs it too, from the reset hook that runs before each example)."""
    from sphinx_gallery import gen_rst

    current = gen_rst.handle_exception
    if getattr(current, "_tut_wrapped", False):
        return

    def wrapped(exc_info, src_file, script_vars, gallery_conf):
        return handle_exception(current, exc_info, src_file, script_vars, gallery_conf)

    wrapped._tut_wrapped = True
    gen_rst.handle_exception = wrapped


