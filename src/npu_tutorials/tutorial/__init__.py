"""The facade a gallery script uses: ``from npu_tutorials.tutorial import Tutorial``.

Owns :class:`Tutorial` (``facade``), the run's declared state (``state``) and its steps
(``steps_weights``, ``steps_serving``, ``steps_accuracy``, ``steps_performance``,
``steps_tuning``, ``records``), which fill the results document from the layers below.

May import: ``core``, ``inputs``, ``engine``, ``record``, ``measure``, ``checks``, ``views``.
Only ``site`` may import it.
"""

from .facade import PROFILES, Tutorial, abandon_active, machine_of, new_state, select_profile
from .state import TutorialState, choose_port

__all__ = ["PROFILES", "Tutorial", "TutorialState", "abandon_active", "choose_port", "machine_of", "new_state",
           "select_profile"]
