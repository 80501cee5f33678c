# Fake NNAL/ATB set_env.sh for the contract tests: ATB_HOME_PATH and LD_LIBRARY_PATH as the real one sets
# them (collect_env.py output in vllm-ascend issue #4256: .../nnal/atb/latest/atb/cxx_abi_1).  The C++ ABI
# is its argument, `--cxx_abi=1` as the CANN 9 images source it (ATB_CXX_ABI, default 1, in
# Ascend/cann-container-image's cann/9.x Dockerfiles).  Without the argument the real script guesses the
# ABI by asking torch (which autoloads torch_npu); this fake then takes cxx_abi_0, so a caller that omits
# the argument is seen.
_fake_abi=0
for _a in "$@"; do case "$_a" in --cxx_abi=*) _fake_abi="${_a#--cxx_abi=}" ;; esac; done
_fake_atb="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/latest/atb/cxx_abi_$_fake_abi"
export ATB_HOME_PATH="$_fake_atb"
export LD_LIBRARY_PATH="$_fake_atb/lib:${LD_LIBRARY_PATH:-}"
unset _fake_atb _fake_abi _a
