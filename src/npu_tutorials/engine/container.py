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
* the image's own environment: its ``ENV``, its entrypoint (vllm-ascend's sources CANN's environment in it) and
  what its ``~/.bashrc`` adds (:data:`IMAGE_SHELL`), then its ``python``.

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

# The command runs as the image's own shell runs it.  ``docker run IMAGE CMD`` gives CMD the image's ENV and its
# entrypoint's ``exec "$@"``, but no shell that reads ``~/.bashrc``, where vllm-ascend's image preloads jemalloc
# and puts /usr/local/lib on the library path (vllm-project/vllm-ascend v0.23.0 ``Dockerfile:75-76``; v0.25.1rc1
# ``Dockerfile:88-89``; ``Dockerfile.310p:67-69`` adds the AICPU sandbox), the environment the host side of a
# comparison gets from scripts/bootstrap_env.sh (IMAGE_BASHRC).  Its docs start the container with an interactive
# shell, ``docker run ... -it $IMAGE bash`` (v0.23.0 ``docs/source/installation.md:340``), which reads it; a login
# shell (its CI's ``bash -el {0}``) stops at the guard atop Ubuntu's root ``~/.bashrc``, ``[ -z "$PS1" ] &&
# return``, before the appended lines.  So ``bash -i``, which then execs the command: the server is the image's
# ``python`` in the environment a reader's shell in that image has.  (Without a terminal, bash says "cannot set
# terminal process group" and "no job control in this shell" first, in the server's log.)
IMAGE_SHELL = ("bash", "-ic", 'exec "$@"', "bash")


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
    devices, through the image's shell (:data:`IMAGE_SHELL`), as the module says."""
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
    return [DOCKER, "run", *opts, image, *IMAGE_SHELL, *argv]


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
