"""One exception type for every problem a user can fix.

A :class:`TutorialError` carries a single line that says what is wrong and
what to do.  Command-line entry points print it without a traceback.
"""

from __future__ import annotations

import re
import sys
from typing import Callable


class TutorialError(RuntimeError):
    """A failure with a message meant for the person running the tutorial."""


# The class of the block in which a failed page shows a TutorialError's message (site.failures writes it,
# checks.site_check reads it)
FAILED_MARK = "tut-failed"


# How a message points at a log it quotes below its first line (engine.server, engine.bench): "<cause>; last
# lines of <log>:" or "<cause>; see <log>"; the one line keeps the cause
_LOG_POINTER = re.compile(r";\s*(last lines of \S.*:|see \S+)$")


def cause(message: str) -> str:
    """A message's first line without the pointer to the log it quotes below it."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    return _LOG_POINTER.sub("", lines[0]) if lines else ""


def one_line(exc: BaseException) -> str:
    """The one line that says why a run failed: a :class:`TutorialError`'s :func:`cause`, else the exception's
    type and first line."""
    first = cause(str(exc))
    if isinstance(exc, TutorialError):
        return first or type(exc).__name__
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def run_cli(main: Callable[[], int | None]) -> None:
    """Run ``main`` and turn a :class:`TutorialError` into one line and exit 2."""
    try:
        code = main()
    except TutorialError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code or 0)
