"""core.threads.beside: engine requests beside the reference do not hold a stop back (a Ctrl-C or a SIGTERM
handler's exit left scripts/negative_controls.py waiting in Executor.__exit__ for a request its server would never
answer)."""

import threading

import pytest

from npu_tutorials.core.threads import beside


def test_a_block_left_by_an_interrupt_returns_while_a_request_is_still_in_flight_and_cancels_the_rest():
    release, started = threading.Event(), threading.Event()

    def request():  # a request to a server that does not answer until it is stopped
        started.set()
        release.wait()
        return "answer"

    with pytest.raises(KeyboardInterrupt):
        with beside(1) as ex:
            in_flight, queued = ex.submit(request), ex.submit(request)
            started.wait()
            raise KeyboardInterrupt
    assert in_flight.running() and queued.cancelled()  # left at once; what had not started never will
    release.set()  # the server stops: the request in flight ends with it
    assert in_flight.result() == "answer"


def test_a_block_that_ends_normally_waits_for_every_call():
    done = []
    with beside(2) as ex:
        for i in range(4):
            ex.submit(lambda i=i: done.append(i))
    assert sorted(done) == [0, 1, 2, 3]
