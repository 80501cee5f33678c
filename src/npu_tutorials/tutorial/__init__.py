"""The facade a gallery script uses: ``from npu_tutorials.tutorial import Tutorial``.

Owns :class:`Tutorial` (``facade``) and its steps (``steps_serving``, ``steps_performance``,
``steps_accuracy``, ``steps_tuning``), which fill the results document from the layers below.

May import: ``core``, ``inputs``, ``engine``, ``record``, ``measure``, ``checks``, ``views``.
Only ``site`` may import it.
"""

from .facade import PROFILES, Tutorial, abandon_active, choose_port, machine_of, select_profile

__all__ = ["PROFILES", "Tutorial", "abandon_active", "choose_port", "machine_of", "select_profile"]
