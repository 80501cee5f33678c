# make html        build the site with every tutorial executed (creates .venv first)
# make test        run the tests
# make html-noplot build the pages without executing the tutorials
# make check       post-build check: every tutorial executed, with tables, figures, provenance
# make html TUTORIAL_ONLY=qwen2_5_0_5b FORCE=1   re-run one tutorial even if nothing it uses changed
# make check GATE=1  also fail on a figure or accuracy check missing, or accuracy regressed, against the recorded
#                  results (results/)
# make check GATE=1 PAIRED=origin/main TUTORIAL_ONLY=smollm2_135m_instruct  and on speed against <ref>'s code,
#                  measured alternately with this checkout's on this host (paired rounds; see the methods page)
# make html SHARD=k/N  execute shard k of N (balanced by recorded cost) and pack it into _build/shards/
# make assemble SHARDS=<dir>  merge the N shard archives into one site, executing nothing
# make record      store this build's results documents in results/<model>/<machine>.json [MODEL=qwen3-0.6b: one]
#                  (a build that fails the gate needs REASON="why it is the new baseline")
# make compare MODEL=qwen3-0.6b A="--max-num-seqs 16" B="--max-num-seqs 4" [K=10] [SERVERS=fresh|shared] [CONTROL=1]
#                  is B faster than A on this host? k rounds of the page's gated steps, alternately (A/B: NAME=value
#                  words for the server's environment and vLLM flags; empty: the page's server as it is; CONTROL=1:
#                  A runs twice per round, and the copy's verdict against A shows this host's false alarms)
# make screenshots  both languages of a built tutorial page as headless Chromium draws them (_build/screenshots/)
# make intl        update the translators' catalogs (docs/source/locale/zh_CN/LC_MESSAGES/*.po) from the pages
# make clean       remove the built site and generated pages; make distclean also .venv and .cache
PYTHON ?= python3.11
# make html VLLM=0.27.1 (and make venv/test with it): another CPU engine than requirements/cpu.txt's, one of those
# src/npu_tutorials/data/pinned/engines.yaml runs here (0.27.1: the vLLM of vllm-ascend's main image), in a venv and
# a build folder of its own
VLLM ?=
VENV ?= $(if $(VLLM),.venv-vllm$(VLLM),.venv)
VPY := $(VENV)/bin/python
# Every command that uses the venv first sources $(VENV)/tutorial-env.sh, written by
# scripts/bootstrap_env.sh: on an Ascend host it sources CANN's set_env.sh (without it even
# `import torch` fails, since torch auto-loads torch_npu); elsewhere it does nothing.
SHELL := /bin/bash
RUN = source $(VENV)/tutorial-env.sh &&
# `import torch` in the build's own processes must not load torch_npu (torch's device-backend autoload
# would, and initialise CANN there); the processes that use the NPU import it themselves (vllm-ascend's
# worker and platform, npu_tutorials.engine.isolated's preload). The vLLM servers the build starts do not
# inherit it (engine.server.BUILD_ONLY_ENV): they run as vllm-ascend's own CI runs them.
export TORCH_DEVICE_BACKEND_AUTOLOAD := 0
BUILDDIR ?= $(if $(VLLM),_build-vllm$(VLLM),_build)
SPHINXOPTS ?=
SPHINX := $(VPY) -m sphinx -b html -c . docs/source $(BUILDDIR)/html -d $(BUILDDIR)/doctrees $(SPHINXOPTS)
# The site in Simplified Chinese too, into $(BUILDDIR)/html/zh_CN: the pages the English pass executed, reused;
# nothing runs again (npu_tutorials.site.i18n)
LANG2 := zh_CN
CHECK_TRANSLATIONS ?= $(VPY) scripts/check_translations.py --lang $(LANG2)
TRANSLATE ?= TUTORIAL_TRANSLATION_PASS=1 TUTORIAL_FORCE= $(VPY) -m sphinx -b html -D language=$(LANG2) -c . \
	docs/source $(BUILDDIR)/html/$(LANG2) -d $(BUILDDIR)/doctrees-$(LANG2) $(SPHINXOPTS)
export TUTORIAL_CACHE ?= $(CURDIR)/.cache
export TUTORIAL_BUILD_DIR ?= $(CURDIR)/$(BUILDDIR)
FORCE ?=
export TUTORIAL_FORCE := $(FORCE)
# make html SHARD=k/N: execute shard k of N and pack it; make assemble SHARDS=<dir>: merge N shards into one site
SHARD ?=
export TUTORIAL_SHARD := $(SHARD)
SHARDS ?=
# make html PUBLISH=npu / make check PUBLISH=npu: the site to publish (real weights on that backend, checked)
PUBLISH ?=
export TUTORIAL_PUBLISH := $(PUBLISH)
ifneq ($(PUBLISH),)
export TUTORIAL_WEIGHTS := real
export TUTORIAL_BACKEND := $(PUBLISH)
endif
PREFLIGHT ?= $(VPY) scripts/preflight.py
CHECK := $(VPY) scripts/check_site.py --build-dir $(BUILDDIR)

GATE ?=
# make check GATE=1 PAIRED=<ref>: also the gated steps of <ref>'s code and this checkout's, alternately on this host (a
# fresh server per side and round, TUTORIAL_ONLY's models); a figure slower beyond its interval by >= 5 % fails
PAIRED ?=
MODEL ?=
A ?=
B ?=
K ?= 10
SERVERS ?= fresh
CONTROL ?= 0
.PHONY: compare html html-noplot test test-engine browser screenshots check record golden assemble intl clean distclean venv
venv: $(VENV)/.ready

$(VENV)/.ready: pyproject.toml requirements/docs.txt requirements/cpu.txt requirements/cuda.txt requirements/weights.txt requirements/hub.txt scripts/bootstrap_env.sh
	PYTHON=$(PYTHON) VENV=$(VENV) VLLM=$(VLLM) bash scripts/bootstrap_env.sh

html: venv
	@$(RUN) $(PREFLIGHT) --prepare
	$(RUN) $(SPHINX)
	$(if $(SHARD),@true,$(RUN) $(TRANSLATE))
	@$(RUN) $(CHECK) --built $(if $(SHARD),,--lang2 $(LANG2))
	@$(RUN) $(if $(SHARD),$(VPY) scripts/shard.py pack --shard $(SHARD) --build-dir $(BUILDDIR),true)
	@echo "site: $(BUILDDIR)/html/index.html ($(LANG2): $(BUILDDIR)/html/$(LANG2)/index.html); results: $(BUILDDIR)/results/"

assemble: venv
	@$(RUN) $(VPY) scripts/shard.py assemble --shards "$(SHARDS)" --build-dir $(BUILDDIR)
	$(RUN) TUTORIAL_ASSEMBLE=1 TUTORIAL_SHARD= $(SPHINX)
	$(RUN) TUTORIAL_ASSEMBLE=1 TUTORIAL_SHARD= $(TRANSLATE)
	@$(RUN) $(CHECK) --built --lang2 $(LANG2)
	@echo "site: $(BUILDDIR)/html/index.html (assembled from $(SHARDS))"

compare: venv
	@test -n "$(MODEL)" || { echo "make compare: name the model, e.g. MODEL=qwen3-0.6b" >&2; exit 2; }
	$(RUN) $(VPY) scripts/compare.py "$(MODEL)" --a="$(A)" --b="$(B)" --k="$(K)" --servers="$(SERVERS)" $(if $(filter-out 0,$(CONTROL)),--control)

html-noplot: venv
	$(RUN) $(SPHINX) -D plot_gallery=0

# The browser test (tests/test_shards.py) opens the built site in Debian's Chromium: installed here where this user
# may (root with apt-get, as on CI), with a CJK font for the Chinese pages' screenshots; elsewhere the test says
# how to install it (or set TUTORIAL_CHROMIUM to a Chromium)
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || [ -n "$$TUTORIAL_CHROMIUM" ] \
	  || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	       && echo "installing Debian's chromium (and a CJK font) for the browser test" \
	       && apt-get update -qq >/dev/null \
	       && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-wqy-zenhei >/dev/null; } \
	  || echo "note: no Chromium, and no root with apt-get to install it: the browser test will fail (apt-get install chromium)"

test: venv browser
	$(RUN) TUTORIAL_REQUIRE_ENGINE=1 $(VPY) -m pytest -m "not slow" tests

# the tests that run the real engine's server and read what it answers (make test-engine VLLM=0.27.1: on that vLLM)
test-engine: venv
	$(RUN) TUTORIAL_REQUIRE_ENGINE=1 $(VPY) -m pytest -m "engine and not slow" tests/test_engine.py \
		tests/test_logprobs_form.py tests/test_vllm_releases.py::test_the_full_vocabulary_request_gives_what_minus_one_gave

# the default copy-paste route's offline script and the other routes, the calibration scripts end to end, the
# template: minutes each
test-slow: venv
	$(RUN) TUTORIAL_REQUIRE_ENGINE=1 $(VPY) -m pytest -m slow tests

# make screenshots: both languages of a tutorial page (PAGE=tutorials/models/<stem>.html) as Chromium draws them,
# into _build/screenshots/, each page checked in the browser
PAGE ?= tutorials/models/qwen2_5_0_5b.html
screenshots: venv browser
	$(RUN) $(VPY) scripts/screenshot.py --site $(BUILDDIR)/html --page $(PAGE) --lang2 $(LANG2) --out $(BUILDDIR)/screenshots

check: venv
	$(RUN) $(CHECK) --strict --lang2 $(LANG2) $(if $(filter-out 0,$(GATE)),--gate $(if $(PAIRED),--paired "$(PAIRED)"))
	$(RUN) $(CHECK_TRANSLATIONS)

intl: venv
	$(RUN) TUTORIAL_TRANSLATION_PASS=1 $(VPY) -m sphinx -b gettext -q -c . docs/source $(BUILDDIR)/gettext \
		-d $(BUILDDIR)/doctrees-gettext
	$(RUN) $(VENV)/bin/sphinx-intl update -p $(BUILDDIR)/gettext -l $(LANG2) -d docs/source/locale
	@echo "catalogs: docs/source/locale/$(LANG2)/LC_MESSAGES (fill each msgstr; make check names what is left)"

# make golden: draw every view of every recorded document again into tests/golden/rendered.json (a view reworded on
# purpose; review the file's difference in the commit)
golden: venv
	$(RUN) env REGENERATE_GOLDEN=1 $(VPY) -m pytest -q -p no:cacheprovider tests/test_render.py -k draws_as_before

record: venv
	$(RUN) $(VPY) scripts/record.py --build-dir $(BUILDDIR) $(if $(MODEL),--model "$(MODEL)")

clean:
	rm -rf $(BUILDDIR) docs/source/tutorials/models docs/source/_generated

distclean: clean
	rm -rf $(VENV) .cache
