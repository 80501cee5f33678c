"""Fake ``vllm_ascend`` for the contract tests.

The real package's ``__init__`` (vllm-project/vllm-ascend v0.23.0, ``vllm_ascend/__init__.py``) defines the
vLLM plugin entry points, ``register()`` returning ``"vllm_ascend.platform.NPUPlatform"`` among them, and
imports nothing at module level: torch_npu is imported later, by ``vllm_ascend.utils`` and the worker.  So
``import vllm_ascend`` succeeds without CANN's environment, and so does this fake.

``_build_info.py`` beside this file is what vllm-ascend's ``setup.py`` (``gen_build_info``) writes for the
image's ``SOC_VERSION``: ``__device_type__ = 'A2'`` for ``Dockerfile``'s ``ascend910b1``.
"""


def register():
    return "vllm_ascend.platform.NPUPlatform"
