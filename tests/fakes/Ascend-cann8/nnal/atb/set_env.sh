# Fake NNAL/ATB set_env.sh for the contract tests: ATB_HOME_PATH and LD_LIBRARY_PATH as the real
# one sets them (collect_env.py output in vllm-ascend issue #4256: .../nnal/atb/latest/atb/cxx_abi_1).
_fake_atb="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/latest/atb/cxx_abi_1"
export ATB_HOME_PATH="$_fake_atb"
export LD_LIBRARY_PATH="$_fake_atb/lib:${LD_LIBRARY_PATH:-}"
unset _fake_atb
