"""Foundations every layer may use: the one error type (``errors``), terminal progress (``progress``),
result tables and verdicts (``tables``), the pydantic bases (``model``), handing memory back (``memory``).

Owns nothing about models, engines or documents.  May import: the standard library and third-party
packages only, no other module of ``npu_tutorials``.
"""
