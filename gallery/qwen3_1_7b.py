"""
Qwen3-1.7B: deploy, benchmark and check against the CPU
=======================================================

Qwen3-1.7B is the next dense size of the Qwen3 family after Qwen3-0.6B, and
one of the sizes vllm-ascend's Qwen3 tutorial serves: the same architecture,
``Qwen3ForCausalLM``, and the same tokenizer, twice as wide.  This page
serves it with vLLM's OpenAI-compatible server, sends that tutorial's chat
request, benchmarks the server with ``vllm bench serve``, and compares the
engine's logits over the whole vocabulary, and its greedy tokens, with an
fp32 CPU reference.

The model is too large for the default CPU build's time budget, so its card
leaves it to accelerators and to a build that names it
(``make html TUTORIAL_ONLY=qwen3_1_7b``).  A build that does not execute it
draws this page from the newest run recorded with the same card
(``results/qwen3-1.7b/``, written by ``make record``); the note under the
title says which run that is.
"""

# %%
# Environment and model
# ---------------------
# Pick the backend (``TUTORIAL_BACKEND``, default ``auto``) and record the
# software and hardware the run used.
from npu_tutorials.tutorial import Tutorial

tut = Tutorial("qwen3-1.7b")
show = tut.show  # tables and plots: views of tut.doc
show.environment()

# %%
# The model's shape, from its ``config.json`` (the package's
# ``data/qwen3-1.7b/NOTICE.md`` cites the source of each file):
show.properties()

# %%
# Weights
# -------
# Real weights come from ModelScope (``Qwen/Qwen3-1.7B``), Hugging Face, or a
# local folder given in ``TUTORIAL_MODEL_PATH_QWEN3_1_7B``; without them the
# tutorial builds a planted stand-in of the real shape (see "How the checks
# work").  The table says which the run used.
weights = tut.prepare_weights()
show.weights()

# %%
# Deploy it yourself
# ------------------
# The commands for your own host, to paste in order: download, serve,
# check, chat, benchmark, with the serve flags of vllm-ascend's Qwen3
# tutorial.
#
# .. include:: /_generated/qwen3-1.7b/deploy.rst
#

# %%
# Serve
# -----
# Start the OpenAI-compatible server and wait until ``/v1/models`` answers.
# The exact command the run used:
tut.prepare_serving_checkpoint()
server = tut.start_server()
show.this_build_ran("server")

# %%
# Functional check
# ----------------
# vllm-ascend's chat request, with the card's token budget:
from openai import OpenAI

client = OpenAI(base_url=f"{server.base_url}/v1", api_key="EMPTY")
request = tut.card.functional
with tut.step("chat request"):
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
# vLLM's own serving benchmark against the running server, under these
# conditions:
show.conditions()

# %%
tut.benchmark()
show.serving.bench_table()

# %%
show.serving.bench_plot()

# %%
# Accuracy against the CPU: logits
# --------------------------------
# The full-vocabulary logits at the last position of a few short prompts,
# from the serving engine, beside transformers in fp32 on the CPU fed the
# same token ids:
tut.logits_agreement()
show.accuracy.logits_table()

# %%
show.accuracy.logits_verdict()

# %%
# Accuracy against the CPU: greedy decoding
# -----------------------------------------
# Greedy tokens on the engine and on the fp32 reference; where they part,
# the reference's margin there tells a near-tie from a fault.
tut.greedy_agreement()
show.text.greedy_verdict()

# %%
show.text.greedy_table()

# %%
# Provenance
# ----------
# Stop the server and write every result above, with where and how it was
# measured, to ``_build/results/qwen3-1.7b.json``.
tut.finish()
show.provenance()

# %%
# On other hardware
# -----------------
# Every run of this tutorial recorded in ``results/``, side by side:
show.compare.on_other_hardware()

# %%
# How the headline figures moved across this model's runs on each kind of
# machine, in date order, with the commit and versions of each run (a dashed
# line where the versions change).
show.compare.history()

# %%
# FAQ
# ---
# **Thinking or not?** As Qwen3-0.6B: send ``"chat_template_kwargs":
# {"enable_thinking": false}`` for a direct answer.
#
# **Which dtype?** bf16, as in vllm-ascend's recipes; 3.4 GB of weights fit
# one card with room for the KV cache.
