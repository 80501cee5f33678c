"""The benchmark worker replaces itself when it has grown: ``vllm bench serve`` leaves memory behind in its
process with every run, and a 30-round ``make compare`` on Qwen2.5-0.5B's page reached 9.4 GB per worker before
the kernel's OOM killer stopped it (engine/bench.py, RSS_LIMIT_MIB).  The size is read from ``/proc``; here it
is set, so no benchmark needs to run."""

from __future__ import annotations

import os

from npu_tutorials.engine import bench
from npu_tutorials.engine.bench import BenchWorker
from npu_tutorials.engine.memory import rss_mib
from npu_tutorials.engine.processes import group_alive


def test_rss_is_read_from_proc_and_an_unknown_process_reads_zero():
    assert rss_mib([os.getpid()]) > 10  # this Python holds more than 10 MiB
    assert rss_mib([2 ** 22 + 12345]) == 0  # beyond pid_max: no such process


def test_a_grown_worker_is_replaced_and_the_old_process_group_is_gone(monkeypatch):
    w = BenchWorker()
    first = w.proc.pid
    try:
        assert not w.renew_if_grown()  # a fresh worker holds far less than the limit
        assert w.proc.pid == first
        monkeypatch.setattr(bench, "rss_mib", lambda pids: bench.RSS_LIMIT_MIB + 1)
        assert w.renew_if_grown()
        assert w.proc.pid != first and w.proc.poll() is None
        assert not group_alive(first)
        assert w in bench._WORKERS  # the new one is stopped at exit like the first
    finally:
        second = w.proc.pid
        w.close()
    assert not group_alive(second) and w not in bench._WORKERS
