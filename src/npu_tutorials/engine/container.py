"""A page's server in another container image: a paired comparison's side served by that image
(``make compare B="image:quay.io/ascend/vllm-ascend:v0.25.1rc1"``), so an upgrade is measured before it is made.

The server command stays the page's; only where it runs changes (:func:`container_argv`):

* ``docker run --rm --name <name> --net=host``: the host's network, so the server listens on the port the
  build leased and the build's own client measures it as it measures a server on the host;
* the devices the tutorial leased and no visible-devices variable (inside, the leased chips are the only
  ones): on an NPU host ``/dev/davinciN`` with the driver's control devices and mounts, as vllm-ascend's
  docs start its container (:func:`~.commands.ascend_container_options`); on a GPU host ``--gpus``;
* every host path the command names (the weights, the cache) mounted read-only at the same path;
* the environment the build adds to the command (``-e``), not the host's;
* the image's entrypoint (vllm-ascend's sources CANN's environment in it) and its ``python``.

``docker run`` is only the client: killing it leaves the container running.  So a stopped server's container
is removed by name (:func:`remove`, ``docker rm -f``) after the client's process group is stopped
(:class:`~.server.VLLMServer`'s ``on_stop``).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Mapping, Sequence

from ..core.errors import TutorialError
from .commands import ascend_container_options
from ..inputs import versions_probe
from .platform import Platform

DOCKER = "docker"


def container_name() -> str:
    return f"npu-tutorials-side-{uuid.uuid4().hex[:12]}"


def _devices(platform: Platform, env: Mapping[str, str]) -> list[str]:
    var = platform.visible_devices_var
    ids = [int(x) for x in env.get(var, "0").split(",") if x.strip()] if var else []
    if platform.ascend:
        return ascend_container_options(ids or [0])
    if platform.accelerator:
        return ["--gpus", f'"device={",".join(str(i) for i in ids or [0])}"']
    return []


def container_argv(image: str, argv: Sequence[str], env: Mapping[str, str], *, platform: Platform,
                   name: str) -> list[str]:
    """``docker run`` of ``argv`` (the page's server command, ``python`` first) in ``image`` on ``platform``'s
    devices, as the module says."""
    mounts: list[str] = []
    for word in argv:
        if word.startswith("/") and os.path.exists(word) and word not in mounts:
            mounts.append(word)
    opts = ["--rm", "--name", name, "--net=host", *_devices(platform, env)]
    for path in mounts:
        opts += ["-v", f"{path}:{path}:ro"]
    for k, v in env.items():
        if k != platform.visible_devices_var:
            opts += ["-e", f"{k}={v}"]
    return [DOCKER, "run", *opts, image, *argv]


def remove(name: str) -> None:
    """Remove container ``name`` whether it runs or not (``docker rm -f``); one that is gone already is fine."""
    try:
        subprocess.run([DOCKER, "rm", "-f", name], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        pass


def image_versions(image: str) -> dict[str, str | None]:
    """:func:`~npu_tutorials.inputs.versions_probe.package_versions` as ``image``'s own ``python`` reads them (through its entrypoint)."""
    probe = Path(versions_probe.__file__).read_text()
    try:
        p = subprocess.run([DOCKER, "run", "--rm", "-i", image, "python", "-I", "-"], input=probe,
                           capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TutorialError(f"image {image}: cannot read its package versions ({exc})") from None
    if p.returncode != 0:
        raise TutorialError(f"image {image}: cannot read its package versions (docker exit {p.returncode}): "
                            f"{(p.stderr.strip().splitlines() or [''])[-1]}")
    return json.loads(p.stdout.strip().splitlines()[-1])
