"""
Qwen-1_8B-Chat: a first-generation QWen model on any vLLM
=========================================================

Qwen-1_8B-Chat is the 1.8 B chat model of Alibaba Cloud's first Qwen
generation, with an 8K-token context.  Its architecture, ``QWenLMHeadModel``,
needs ``--trust-remote-code`` and was removed from vLLM after 0.23.0.  The
vllm-ascend image this site pins still carries that vLLM, but first-generation
QWen is in no vllm-ascend support list or test, so the original report's route
is untested on the NPU.  This tutorial serves it on every
backend through an exact conversion to the equivalent ``Qwen2ForCausalLM``
layout, with no remote code at all.  It then
repeats the report's checks: a chat request, the serving benchmark, numeric
and text-level consistency against an fp32 CPU reference, and the task-level
checks (GSM-style math and five Chinese questions).
"""

# %%
# Environment and model
# ---------------------
from npu_tutorials.tutorial import Tutorial

tut = Tutorial("qwen-1_8b-chat")
show = tut.show  # tables and plots: views of tut.doc
show.environment()

# %%
# The report's property table, generated from the model card and its config:
show.properties()

# %%
# Weights
# -------
# Real weights come from ModelScope (``qwen/Qwen-1_8B-Chat``), Hugging Face,
# or ``TUTORIAL_MODEL_PATH_QWEN_1_8B_CHAT``.  Without them this build makes a
# stand-in in the *original* first-generation layout (QWen parameter names,
# ``auto_map`` config, ``qwen.tiktoken``), so it looks like what ModelScope
# delivers, with weights planted from the card's seed (a decisive next-token
# map in every layer: see "How the checks work").
weights = tut.prepare_weights()
show.weights()

# %%
# Converted, on every vLLM
# ------------------------
# Mathematically, QWen is a Qwen2 model with as many KV heads as attention
# heads, an MLP of width ``intermediate_size / 2`` and ``rope_theta =
# rotary_emb_base``; dynamic NTK and logn scaling only act beyond 8192
# tokens.  The converter splits the fused ``c_attn`` projection into q/k/v,
# renames ``w2 -> gate_proj``, ``w1 -> up_proj``, ``c_proj -> down_proj``, and
# rebuilds the tokenizer as a ``tokenizer.json`` with QWen's special tokens and
# the ChatML chat template.  A test proves it exact: an independent fp32
# forward of the original architecture equals transformers' Qwen2 on the
# converted weights on prompts of several lengths.  How this build served it:
tut.prepare_serving_checkpoint()
show.serving_checkpoint()

# %%
# Deploy it yourself
# ------------------
# The commands for your own host, to paste in order: download, convert,
# serve, check, chat, benchmark.  They are generated from the model card, and
# a test runs the CPU tab.  What this build itself ran follows below,
# collapsed and labelled "This build ran": those commands carry what only the
# build needs and are not for copying.
#
# .. include:: /_generated/qwen-1_8b-chat/deploy.rst
#

# %%
# Deploy and check readiness
# --------------------------
# The report's serve flags (served name ``qwen-1_8b-chat``, bf16,
# ``--max-model-len 8192``, ``--max-num-seqs 32``).  The exact command this
# build ran:
server = tut.start_server()
show.this_build_ran("server")

# %%
# Chat
# ----
# The report's chat request through the ``openai`` client, with this build's
# reply (the same request with curl is in "Deploy it yourself"):
from openai import OpenAI

client = OpenAI(base_url=f"{server.base_url}/v1", api_key="EMPTY")
with tut.step("chat request"):  # if the server dies here, the error says so
    completion = client.chat.completions.create(
        model="qwen-1_8b-chat",
        messages=[{"role": "user", "content": "你好"}],
        temperature=0,
        max_tokens=32,
    )
tut.record_completion("你好", completion)
show.serving.functional()

# %%
# Serving benchmark
# -----------------
# The report ran ``vllm bench serve`` with 64 prompts of 512 random tokens,
# 128 output tokens, at 4 requests per second.  The conditions of this build:
show.conditions()

# %%
tut.benchmark()
show.serving.bench_table()

# %%
# The benchmark command this build ran (against its own server):
show.this_build_ran("bench")

# %%
show.serving.bench_plot()

# %%
# Raw result: :download:`qwen-1_8b-chat-bench.json <data/qwen-1_8b-chat-bench.json>`.
#
# GSM8K
# -----
# The report's first accuracy figure: the first 20 GSM8K problems, answered
# greedily by the server as deployed.  GSM8K itself needs a dataset hub;
# offline, GSM8K-style problems come from ``reasoning-gym``'s templates.  The
# table says which set was used, and which engine answered.
tut.gsm()
show.tasks.gsm_examples()

# %%
show.tasks.gsm_table()

# %%
# Numeric consistency
# -------------------
# One forward pass over a fixed text: at every position, does the engine's
# most likely next token equal the reference's, how far apart are the
# perplexities, and how close are the whole next-token distributions?  The
# engine returns all 151,936 logits only for the position right after a
# prompt, so the engine side is one request per prefix of the text.
tut.forward_consistency()
show.accuracy.consistency_verdict()

# %%
# Where the engine's most likely token differs from the reference's, is it a
# near-tie that rounding can flip, or an arithmetic difference?  The
# reference's gap between its two best tokens, beside the engine's error there:
show.accuracy.consistency_flips()

# %%
show.accuracy.consistency_vs_reported()

# %%
# Text-level consistency
# ----------------------
# The report's five questions, greedy (temperature 0) through the chat
# template, on the engine and on the reference, side by side:
tut.text_consistency()
show.text.text_table()

# %%
show.text.text_verdict()

# %%
# Chinese QA
# ----------
# The same five answers scored against the expected ones:
tut.qa_scores()
show.tasks.qa_table()

# %%
# e2e test config
# ---------------
# The report contributed a vllm-ascend e2e accuracy config.  Generated from
# the model card and what this build ran (:download:`qwen-1_8b-chat-e2e.yaml <data/qwen-1_8b-chat-e2e.yaml>`):
tut.e2e_config()
print(show.tasks.e2e_config())

# %%
# Provenance
# ----------
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
# **Do I need --trust-remote-code?** Only to serve the original checkpoint on
# a vLLM that still has ``QWenLMHeadModel`` (the vllm-ascend 0.23 line), and
# then every step that loads its tokenizer needs it too (``vllm bench serve
# --trust-remote-code``).  The converted checkpoint is a plain
# ``Qwen2ForCausalLM`` and needs none, on every vLLM.
#
# **Is the conversion lossy?** No: it only splits and renames tensors; a
# test compares logits with an independent implementation of the original
# architecture to fp32 tolerance.  Beyond 8192 tokens the original's dynamic
# NTK and logn scaling would differ; ``--max-model-len 8192`` stays inside.
#
# **Left-padded batches.** The original ignores position ids for padded
# batches; vLLM does not pad, so served results are unaffected.
