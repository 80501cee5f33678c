"""Concurrent tutorials on one runner: disjoint device sets, ports of their own, sequential on a CPU."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from npu_tutorials.engine import scheduler
from npu_tutorials.core.errors import TutorialError

ROOT = Path(__file__).resolve().parents[1]

CONF = f"""
import sys
sys.path.insert(0, {str(ROOT / 'src')!r})
extensions = ["sphinx_gallery.gen_gallery"]
sphinx_gallery_conf = {{
    "examples_dirs": ["gallery"], "gallery_dirs": ["generated"], "filename_pattern": r"\\.py$",
    "reset_modules": ("npu_tutorials.site.teardown.reset_example",), "reset_modules_order": "both",
    "abort_on_example_error": True, "parallel": 4,
}}
"""

# A stand-in tutorial: leases one device from the pool, then waits until all four hold theirs at once.
EXAMPLE = '''"""
Tutorial {n}
============
"""
import json, os, time
from pathlib import Path
from npu_tutorials.engine.scheduler import lease_devices, lease_port

lease = lease_devices(1)
port, port_lease = lease_port()
out = Path(os.environ["RECORD_DIR"])
(out / "{n}.json").write_text(json.dumps({{"pid": os.getpid(), "devices": lease.names, "port": port}}))
deadline = time.monotonic() + 300
while len(list(out.glob("*.json"))) < 4 and time.monotonic() < deadline:
    time.sleep(0.1)
print("all four held their devices at once:", len(list(out.glob("*.json"))) == 4)
lease.release()
port_lease.release()
'''


def test_four_tutorials_run_at_once_on_four_disjoint_device_sets(tmp_path):
    proj = tmp_path / "proj"
    (proj / "gallery").mkdir(parents=True)
    (proj / "gallery" / "README.txt").write_text("Gallery\n=======\n")
    for n in range(1, 5):
        (proj / "gallery" / f"tut{n}.py").write_text(EXAMPLE.format(n=n))
    (proj / "conf.py").write_text(CONF)
    (proj / "index.rst").write_text("Site\n====\n\n.. toctree::\n\n   generated/index\n")
    record = tmp_path / "record"
    record.mkdir()
    env = {**os.environ, "TUTORIAL_DEVICE_POOL": "0,1,2,3", "TUTORIAL_LEASE_DIR": str(tmp_path / "leases"),
           "RECORD_DIR": str(record)}
    r = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", str(proj), str(proj / "_build")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    runs = [json.loads(p.read_text()) for p in sorted(record.glob("*.json"))]
    assert len({x["pid"] for x in runs}) == 4  # four worker processes
    assert sorted(d for x in runs for d in x["devices"]) == ["0", "1", "2", "3"]  # disjoint, all used
    assert len({x["port"] for x in runs}) == 4
    for n in range(1, 5):
        assert "all four held their devices at once: True" in (proj / "_build" / "generated" / f"tut{n}.html").read_text()


def test_leases_wait_for_free_devices(tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORIAL_LEASE_DIR", str(tmp_path))
    a = scheduler.lease_devices(2, ["0", "1", "2"])
    assert a.names == ["0", "1"]
    waited = []
    with pytest.raises(TutorialError, match="no 2 free devices"):
        scheduler.lease_devices(2, ["0", "1", "2"], timeout=0, on_wait=lambda: waited.append(1))
    a.release()
    b = scheduler.lease_devices(2, ["0", "1", "2"], timeout=0)
    assert b.names == ["0", "1"]
    with pytest.raises(TutorialError, match="needs 4 devices, the pool of this build has 3"):
        scheduler.lease_devices(4, ["0", "1", "2"])
    assert scheduler.lease_devices(1, []) is None  # no pool: the runner's visible devices, unchanged


def test_a_dead_holder_frees_its_devices(tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORIAL_LEASE_DIR", str(tmp_path))
    code = ("import os, sys; sys.path.insert(0, %r); from npu_tutorials.engine.scheduler import lease_devices; "
            "lease_devices(1, ['7']); os._exit(0)") % str(ROOT / "src")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "TUTORIAL_LEASE_DIR": str(tmp_path)})
    assert scheduler.lease_devices(1, ["7"], timeout=0).names == ["7"]


@pytest.mark.parametrize("env, backend, devices, per, n, jobs", [
    ({}, "cpu", 0, 1, 3, 1),  # a 2-core CPU stays sequential
    ({}, "npu", 8, 1, 3, 3),  # one job per tutorial, up to the devices
    ({}, "npu", 8, 2, 10, 4),  # tensor-parallel 2: four device pairs
    ({}, "npu", 1, 1, 3, 1),
    ({"TUTORIAL_JOBS": "2"}, "cpu", 0, 1, 3, 2),
    ({"TUTORIAL_JOBS": "8"}, "npu", 8, 1, 3, 3),
])
def test_how_many_jobs(monkeypatch, env, backend, devices, per, n, jobs):
    monkeypatch.delenv("TUTORIAL_JOBS", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert scheduler.jobs_for(backend, devices, per, n) == jobs


def test_bad_jobs_value(monkeypatch):
    monkeypatch.setenv("TUTORIAL_JOBS", "many")
    with pytest.raises(TutorialError, match="TUTORIAL_JOBS='many' is not a number"):
        scheduler.jobs_for("npu", 8, 1, 3)
