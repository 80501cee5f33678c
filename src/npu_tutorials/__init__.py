"""Executable vLLM model tutorials: the machinery behind the gallery pages.

Every gallery script imports from here; nothing in this package runs heavy
work at import time.
"""

from .errors import TutorialError

__all__ = ["TutorialError"]
__version__ = "0.1.0"
