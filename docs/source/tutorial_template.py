"""
<Model>: deploy, benchmark and check against the CPU
====================================================

A paragraph of why: what the model is, which report this page replaces, and
what the page does while the site is built.  (Copy this file to
``gallery/<key with underscores>.py``: every script there is a tutorial.)
"""

# %%
# Environment
# -----------
# The card key is the only model-specific line of code (put yours in its
# place: the build finds a tutorial's card by this literal); everything else
# comes from the card.
from npu_tutorials.tutorial import Tutorial

tut = Tutorial("qwen2.5-0.5b")
show = tut.show  # tables and plots: views of tut.doc
show.environment()

# %%
# Weights
# -------
# Real weights where found, else a planted stand-in; the table says which.
tut.prepare_weights()
show.weights()

# %%
# Deploy it yourself
# ------------------
# The commands for a reader's own host, generated from the card (put your
# card's key in the path).
#
# .. include:: /_generated/qwen2.5-0.5b/deploy.rst
#

# %%
# Serve
# -----
tut.start_server()
show.this_build_ran("server")

# %%
# Performance
# -----------
# ``vllm bench serve`` on the card's conditions for this build's profile.
show.conditions()

# %%
tut.benchmark()
show.serving.bench_table()

# %%
# How the latency is distributed over the requests (a page has a figure):
show.serving.bench_plot()

# %%
# Accuracy against the CPU
# ------------------------
# The engine's full-vocabulary logits against the fp32 reference, judged by
# the card's thresholds.
tut.logits_agreement()
show.accuracy.logits_verdict()

# %%
# Provenance
# ----------
tut.finish()
show.provenance()
