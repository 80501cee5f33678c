# Fake CANN 9 toolkit set_env.sh for the contract tests.  CANN 9 installs the toolkit in
# <root>/cann-9.x and keeps <root>/ascend-toolkit/latest as a link to it; its set_env.sh points
# ASCEND_TOOLKIT_HOME (and ASCEND_HOME_PATH, ASCEND_AICPU_PATH, ASCEND_OPP_PATH) at cann-9.x and puts
# both <cann-9.x>/lib64 and <ascend-toolkit/latest>/lib64 on LD_LIBRARY_PATH: the values the CANN 9
# images copy "from /usr/local/Ascend/ascend-toolkit/set_env.sh" into their ENV lines
# (Ascend/cann-container-image, cann/9.1.0-beta.3-910b-ubuntu22.04-py3.12/Dockerfile).
_fake_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_fake_home="$(cd "$_fake_root/ascend-toolkit/latest" && pwd -P)"
export ASCEND_TOOLKIT_HOME="$_fake_home"
export ASCEND_HOME_PATH="$_fake_home"
export ASCEND_AICPU_PATH="$_fake_home"
export ASCEND_OPP_PATH="$_fake_home/opp"
export LD_LIBRARY_PATH="$_fake_home/lib64:$_fake_root/ascend-toolkit/latest/lib64:${LD_LIBRARY_PATH:-}"
unset _fake_root _fake_home
