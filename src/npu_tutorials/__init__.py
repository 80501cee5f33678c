"""Executable vLLM model tutorials: the machinery behind the gallery pages.

Every gallery script imports from here; nothing in this package runs heavy
work at import time.  The subpackages are layers, each importing only the ones
before it: ``core``, ``inputs``, ``engine``, ``record``, ``measure``,
``checks``, ``views``, ``tutorial`` (the facade), ``site``, ``cli`` (the
commands) (``tests/test_imports.py`` keeps it so).
"""

from .core.errors import TutorialError

__all__ = ["TutorialError"]
__version__ = "0.1.0"
