"""
palmyra-mini: latency curves, batch scaling and greedy agreement
================================================================

Writer's palmyra-mini (about 1.78 B parameters) is a fine-tune of
Qwen2.5-1.5B with the registered ``Qwen2ForCausalLM`` architecture, so vLLM
(and vLLM-Ascend) serve it without code changes.  The original report
measured what the other tutorials do not: how latency grows with the input
length, how throughput grows with concurrency, and how often bf16 greedy
decoding on the accelerator reproduces an fp32 CPU run token for token.
Several of its tables were lost; this page measures all of them again, and
adds how close decoding gets to the memory-bandwidth roofline and how much
faster vLLM is than plain transformers on the same device.
"""

# %%
# Environment and model
# ---------------------
from npu_tutorials.tutorial import Tutorial

tut = Tutorial("palmyra-mini")
show = tut.show  # tables and plots: views of tut.doc
show.environment()

# %%
# The model's shape.  Its own ``config.json`` was not available offline: the
# values are Qwen2.5-1.5B's, and the fields marked *inferred* (an untied
# ``lm_head``, from the 3.55 GB checkpoint size) are our reading, not
# published facts.
show.properties()

# %%
# Weights
# -------
# Real weights: ``hf download Writer/palmyra-mini`` (or
# ``TUTORIAL_MODEL_PATH_PALMYRA_MINI``).  Otherwise a seeded stand-in.
weights = tut.prepare_weights()
show.weights()

# %%
# Deploy it yourself
# ------------------
# The report's serve flags: tensor parallel 1, bf16, ``--max-model-len
# 8192``, chunked prefill, ``--gpu-memory-utilization 0.85`` on accelerators.
# The report also set ``VLLM_USE_V1=0``; current vLLM has only the V1
# engine (the variable no longer exists), which schedules chunked prefill by
# default.  The commands for your own host, to paste in order, generated from
# the model card (a test runs the CPU tab):
#
# .. include:: /_generated/palmyra-mini/deploy.rst
#

# %%
# Serve
# -----
# This build's own server, for the measurements below: the deployment as
# it is served.  The exact command it ran (on a CPU without native bf16 the
# accuracy checks run on a bfloat16 server started for them, the
# performance steps on this float32 one, and the page says so), not for
# copying:
tut.prepare_serving_checkpoint()
server = tut.start_server()
show.this_build_ran("server")

# %%
# Accuracy: greedy agreement with the CPU
# ---------------------------------------
# Five prompts of different lengths and content, 20 greedy tokens each, on
# the engine and on the fp32 CPU reference fed the same token ids.
tut.greedy_agreement()
show.text.greedy_verdict()

# %%
show.text.greedy_table()

# %%
show.text.greedy_plot()

# %%
# Performance: latency against input length
# -----------------------------------------
# Each point is a ``vllm bench serve`` run: first one request at a time
# (time to first token is then the prefill latency, time per output token
# the decode latency), then all requests at once, where chunked prefill
# lets them share the engine.
tut.input_length_sweep()
show.performance.length_table()

# %%
# Performance: throughput against concurrency
# -------------------------------------------
# Output throughput at each concurrency of this profile (1 to 16), and the
# scaling efficiency throughput(n) / (n x throughput(1)).
tut.concurrency_sweep()
show.performance.concurrency_table()

# %%
show.performance.sweep_plot()

# %%
# Efficiency
# ----------
# At concurrency 1 every decoded token reads all the weights once, so the
# memory bandwidth bounds the speed.  Beside it, the same checkpoint through
# plain transformers ``generate`` on the same device: the baseline you would
# otherwise use.  The baseline goes beyond the report: a quick CPU build
# shows it as a recorded build measured it, and says which.
tut.efficiency()
show.performance.efficiency_table()

# %%
# Tuning
# ------
# The report measured eager mode with default knobs.  A production
# deployment compiles graphs (ACL graph on vllm-ascend, CUDA graphs on a GPU,
# torch.compile on a CPU) and may set the backend's own knobs: on an NPU,
# those of vllm-ascend's optimization and tuning guide and of the deployers'
# reports.  Each knob is measured alone on top of graph mode, then the knobs
# that helped beyond the spread, combined, all on the same conditions: TPOT at
# concurrency 1 with its spread, output throughput at 1 and at the sweep's
# highest concurrency, the fraction of the bandwidth roofline reached, and
# the start-up time.  A tiny model of the same architecture, served the same
# way, measures the fixed per-token overhead.  Tuning goes beyond the report
# and costs minutes on a CPU: a quick CPU build shows the tuning a recorded
# build measured (its date, machine, profile and commit under the table).
tut.tuning()
show.tuning.tuning_table()

# %%
# The knobs, where each comes from and why it should help:
show.tuning.tuning_knobs_table()

# %%
show.tuning.tuning_plot()

# %%
# The tuned deployment, to copy:
show.tuning.tuned_command()

# %%
# Known limitations
# -----------------
# What the server itself reported in this build (flags it ignored, kernels
# it lacked), deduplicated:
tut.known_limitations()
show.known_limitations()

# %%
# Validation scripts
# ------------------
# The report's two scripts, usable on an NPU host without Sphinx:
#
# .. code-block:: bash
#
#    # load the model and answer one request
#    python scripts/validate.py palmyra-mini
#    # the full evaluation: accuracy and performance, JSON out
#    python scripts/eval_full.py palmyra-mini --out palmyra-mini.json
#
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
