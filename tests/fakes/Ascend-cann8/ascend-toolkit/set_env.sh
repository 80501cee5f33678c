# Fake CANN toolkit set_env.sh for the contract tests: exports the variables the real one does
# (as listed by `python collect_env.py` in vllm-ascend issue #4256: ASCEND_TOOLKIT_HOME,
# ASCEND_HOME_PATH, ASCEND_AICPU_PATH, ASCEND_OPP_PATH, LD_LIBRARY_PATH with <toolkit>/latest/lib64),
# pointing into this fake tree.
_fake_toolkit="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export ASCEND_TOOLKIT_HOME="$_fake_toolkit/latest"
export ASCEND_HOME_PATH="$_fake_toolkit/latest"
export ASCEND_AICPU_PATH="$_fake_toolkit/latest"
export ASCEND_OPP_PATH="$_fake_toolkit/latest/opp"
export LD_LIBRARY_PATH="$_fake_toolkit/latest/lib64:${LD_LIBRARY_PATH:-}"
unset _fake_toolkit
