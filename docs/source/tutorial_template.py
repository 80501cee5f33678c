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
# The card key is the only model-specific line of code; everything else comes
# from the card.  ``TUTORIAL_TEMPLATE_MODEL`` lets the test run this template.
import os

from npu_tutorials.tutorial import Tutorial

tut = Tutorial(os.environ.get("TUTORIAL_TEMPLATE_MODEL", "qwen2.5-0.5b"))
show = tut.show  # tables and plots: views of tut.doc
show.environment()

# %%
# Weights
# -------
# Real weights where found, else a planted stand-in; the table says which.
tut.prepare_weights()
show.weights()

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
