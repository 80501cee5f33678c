# make html        build the site with every tutorial executed (creates .venv first)
# make test        run the tests
# make html-noplot build the pages without executing the tutorials
# make check       post-build check: every tutorial executed, with tables, figures, provenance
# make html TUTORIAL_ONLY=qwen2_5_0_5b FORCE=1   re-run one tutorial even if nothing it uses changed
# make clean       remove the built site and generated pages; make distclean also .venv and .cache
PYTHON ?= python3.11
VENV ?= .venv
VPY := $(VENV)/bin/python
# Every command that uses the venv first sources $(VENV)/tutorial-env.sh, written by
# scripts/bootstrap_env.sh: on an Ascend host it sources CANN's set_env.sh (without it even
# `import torch` fails, since torch auto-loads torch_npu); elsewhere it does nothing.
SHELL := /bin/bash
RUN = source $(VENV)/tutorial-env.sh &&
BUILDDIR ?= _build
SPHINXOPTS ?=
SPHINX := $(VPY) -m sphinx -b html -c . docs/source $(BUILDDIR)/html -d $(BUILDDIR)/doctrees $(SPHINXOPTS)
export TUTORIAL_CACHE ?= $(CURDIR)/.cache
export TUTORIAL_BUILD_DIR ?= $(CURDIR)/$(BUILDDIR)
FORCE ?=
export TUTORIAL_FORCE := $(FORCE)
PREFLIGHT ?= $(VPY) scripts/preflight.py
CHECK := $(VPY) scripts/check_site.py --build-dir $(BUILDDIR)

.PHONY: html html-noplot test check clean distclean venv
venv: $(VENV)/.ready

$(VENV)/.ready: pyproject.toml requirements/docs.txt requirements/cpu.txt requirements/cuda.txt scripts/bootstrap_env.sh
	PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/bootstrap_env.sh

html: venv
	@$(RUN) $(PREFLIGHT)
	$(RUN) $(SPHINX)
	@$(RUN) $(CHECK) --built
	@echo "site: $(BUILDDIR)/html/index.html; results: $(BUILDDIR)/results/"

html-noplot: venv
	$(RUN) $(SPHINX) -D plot_gallery=0

test: venv
	$(RUN) $(VPY) -m pytest tests

check: venv
	$(RUN) $(CHECK) --strict

clean:
	rm -rf $(BUILDDIR) docs/source/tutorials/models docs/source/_generated

distclean: clean
	rm -rf $(VENV) .cache
