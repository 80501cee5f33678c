"""One exception type for every problem a user can fix.

A :class:`TutorialError` carries a single line that says what is wrong and
what to do.  Command-line entry points print it without a traceback.
"""

from __future__ import annotations

import sys
from typing import Callable


class TutorialError(RuntimeError):
    """A failure with a message meant for the person running the tutorial."""


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
