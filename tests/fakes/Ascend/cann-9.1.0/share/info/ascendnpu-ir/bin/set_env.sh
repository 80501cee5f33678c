# Fake set_env.sh of CANN 9's AscendNPU IR (BiSheng IR) component, which the CANN 9 images source second,
# after the toolkit's (entrypoint and /etc/profile of Ascend/cann-container-image's cann/9.x Dockerfiles:
# <cann-9.x>/share/info/ascendnpu-ir/bin/set_env.sh).  triton-ascend compiles kernels by calling
# `bishengir-compile`; this fake puts its directory (holding a stub of it) on PATH.  What else the real
# script exports is not known here.
_fake_ir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$_fake_ir:$PATH"
unset _fake_ir
