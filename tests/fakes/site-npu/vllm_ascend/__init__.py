"""Fake ``vllm_ascend`` for the contract tests.

The real package's ``__init__`` defines the vLLM platform-plugin entry point ``register()``,
which returns ``"vllm_ascend.platform.NPUPlatform"`` (vllm-project/vllm-ascend,
``vllm_ascend/__init__.py``).  Like the real one it needs torch_npu importable.
"""

import torch_npu  # noqa: F401  (fails the same way when CANN's set_env.sh was not sourced)


def register():
    return "vllm_ascend.platform.NPUPlatform"
