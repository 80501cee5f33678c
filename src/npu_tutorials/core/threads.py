"""A thread pool for requests sent beside other work, that does not hold a stop back.

``concurrent.futures.ThreadPoolExecutor`` as a context manager waits for every submitted call on the way out,
also when the block is left by Ctrl-C, a SIGTERM handler's ``sys.exit`` or an error.  A check's engine requests
run in such a pool beside the fp32 reference; a stop then waited for requests to a server that the ``with`` around
it had not stopped yet (seen: ``scripts/negative_controls.py`` under SIGINT and SIGTERM hung in
``Executor.__exit__`` while its server, told to stop, never answered the request in flight).  :func:`beside`
waits for the calls only when its block ends normally; otherwise it cancels what has not started and returns at
once, so the server's own ``with`` stops the server, and the calls in flight end with it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def beside(workers: int) -> Iterator[ThreadPoolExecutor]:
    ex = ThreadPoolExecutor(max_workers=workers)
    try:
        yield ex
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
