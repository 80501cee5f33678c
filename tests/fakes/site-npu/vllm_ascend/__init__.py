"""Fake ``vllm_ascend`` for the contract tests.

The real package's ``__init__`` (vllm-project/vllm-ascend v0.23.0, ``vllm_ascend/__init__.py``) defines the
vLLM plugin entry points, ``register()`` returning ``"vllm_ascend.platform.NPUPlatform"`` (lines 38-41) among
them, and at its end, line 78, imports ``vllm_ascend.logger``, whose line 18 is ``from vllm import envs``:
``import vllm_ascend`` imports vLLM, and vLLM imports torch (vLLM 0.23.0: ``vllm/__init__.py:14`` imports
``vllm.env_override``, whose line 87 is ``import torch``).  torch then loads torch_npu through its
device-backend autoload unless ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` (see ``logger.py`` beside this file), so
without CANN's environment ``import vllm_ascend`` fails as ``import torch_npu`` does.  The fakes carry no vLLM
and no torch: this package keeps the real import order (``register`` first, ``logger`` last) and its
``logger`` stands in for what that chain does at the boundary this project sees.

``_build_info.py`` beside this file is what vllm-ascend's ``setup.py`` (``gen_build_info``) writes for the
image's ``SOC_VERSION``: ``__device_type__ = 'A2'`` for ``Dockerfile``'s ``ascend910b1``.
"""


def register():
    return "vllm_ascend.platform.NPUPlatform"


import vllm_ascend.logger  # noqa: E402, F401  (as the real __init__.py, line 78)
