"""Progress on the build's terminal: what each step is doing, how far along, what it cost.

sphinx-gallery captures a tutorial's ``sys.stdout`` and ``sys.stderr`` into its
page.  These lines go to the terminal the build was started from
(``sys.__stderr__``), so they never reach a page.  On a terminal, long loops
show a live bar (tqdm); elsewhere (CI logs) they print plain lines, at most one
every :data:`QUIET_S` seconds.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
import time
from contextlib import contextmanager
from typing import Iterable, Iterator, TextIO, TypeVar

T = TypeVar("T")
QUIET_S = 30.0  # the longest a running build stays silent on a terminal without a TTY


def terminal() -> TextIO:
    """The build's own terminal, never the page (sphinx-gallery swaps sys.stderr during a run)."""
    return sys.__stderr__ or sys.stderr


def is_tty(stream: TextIO | None = None) -> bool:
    stream = stream or terminal()
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("CI", "") in ("", "0", "false")


def fmt_s(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class Progress:
    """Start and end lines for each step of one tutorial, and its cost table."""

    def __init__(self, label: str, stream: TextIO | None = None, every: float = QUIET_S):
        self.label = label
        self.every = every
        self.stream = stream
        self.costs: list[tuple[str, float, int]] = []  # (step, seconds, nesting depth)
        self._depth = 0
        self._last = time.monotonic()

    @property
    def out(self) -> TextIO:
        return self.stream or terminal()

    def say(self, text: str) -> None:
        print(f"[{self.label}] {text}", file=self.out, flush=True)
        self._last = time.monotonic()

    def maybe_say(self, text: str, every: float = QUIET_S) -> None:
        """A heartbeat: print unless something was printed in the last ``every`` seconds."""
        if time.monotonic() - self._last >= every:
            self.say(text)

    @contextmanager
    def step(self, name) -> Iterator[None]:
        """A timed step named ``name`` (a string, or a stored message: its English on the terminal)."""
        t = time.monotonic()
        depth = self._depth
        pad = "  " * depth
        self.say(f"{pad}start {name}")
        self._depth += 1
        stop = threading.Event()

        def heartbeat():  # never silent for longer than QUIET_S while a step runs
            while not stop.wait(self.every):
                self.maybe_say(f"{pad}  ... {name}: {fmt_s(time.monotonic() - t)} so far", self.every)

        beat = threading.Thread(target=heartbeat, daemon=True)
        beat.start()
        try:
            with library_warnings_to_terminal():
                yield
        except BaseException as exc:
            self.say(f"{pad}FAILED {name} after {fmt_s(time.monotonic() - t)}: {type(exc).__name__}")
            self.costs.append((name, time.monotonic() - t, depth))
            raise
        finally:
            self._depth = depth
            stop.set()
        dt = time.monotonic() - t
        self.costs.append((name, dt, depth))
        self.say(f"{pad}done  {name} ({fmt_s(dt)})")

    def iterate(self, items: Iterable[T], name: str, total: int | None = None) -> Iterator[T]:
        """Loop over ``items`` as "name k/n" steps, each with its start and end line."""
        items = list(items)
        n = total or len(items)
        for k, item in enumerate(items, 1):
            with self.step(f"{name} {k}/{n}"):
                yield item

    def bar(self, total: int, desc: str):
        """A tqdm bar on a TTY; elsewhere (CI logs) plain "k/n" lines, at most one every 30 s."""
        if is_tty(self.out):
            try:
                from tqdm import tqdm

                return tqdm(total=total, desc=f"[{self.label}] {desc}", file=self.out, leave=False,
                            mininterval=0.5, dynamic_ncols=True)
            except ImportError:
                pass
        return PlainBar(self, total, desc)

    def cost_table(self) -> str:
        if not self.costs:
            return ""
        top = [(str(n), s) for n, s, d in self.costs if d == 0]  # a name may be a stored message: its English
        width = max(len(n) for n, _ in top + [("total", 0)])
        lines = [f"[{self.label}] cost of each step:"]
        lines += [f"  {n.ljust(width)}  {fmt_s(s):>9}" for n, s in top]
        lines.append(f"  {'total'.ljust(width)}  {fmt_s(sum(s for _, s in top)):>9}")
        return "\n".join(lines)

    def top_level(self) -> list[tuple[str, float]]:
        return [(n, s) for n, s, d in self.costs if d == 0]


class PlainBar:
    """tqdm's ``update``/``close`` as whole lines, for logs without a terminal."""

    def __init__(self, progress: Progress, total: int, desc: str):
        self.progress, self.total, self.desc, self.n = progress, total, desc, 0

    def update(self, k: int = 1) -> None:
        self.n += k
        self.progress.maybe_say(f"{self.desc}: {self.n}/{self.total}")

    def close(self) -> None:
        pass


# -- library warnings: on the terminal, never on a page ----------------------------------------------------------
_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this package
_DEFAULT_SHOWWARNING = warnings.showwarning


def _show_library_warning(message, category, filename, lineno, file=None, line=None):
    """``warnings.showwarning`` while a tutorial's step runs: a warning raised in a library (transformers' FutureWarnings,
    torch's UserWarnings: their text names a site-packages path and quotes a source line) goes to the build's
    terminal, where the builder sees it, and not into the page sphinx-gallery captures from ``sys.stderr``; one of
    this package's own still goes where Python sends it."""
    if file is None and not os.path.abspath(filename).startswith(_PROJECT):
        terminal().write(warnings.formatwarning(message, category, filename, lineno, line))
        return
    _DEFAULT_SHOWWARNING(message, category, filename, lineno, file, line)


@contextmanager
def library_warnings_to_terminal() -> Iterator[None]:
    """Library warnings go to the terminal (:func:`_show_library_warning`) while the block runs: every step of a
    tutorial (:meth:`Progress.step`).  Set per step, not once: sphinx-gallery sets its own ``showwarning`` at the
    start of each cell it runs (``sphinx_gallery.gen_rst.patch_warnings``)."""
    saved = warnings.showwarning
    warnings.showwarning = _show_library_warning
    try:
        yield
    finally:
        warnings.showwarning = saved
