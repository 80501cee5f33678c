"""Whether a build can be trusted: the regression gate (``gate``) and recording a baseline past it
(``recording``), the negative controls (``controls``) and the methods page's figures (``methods``), the
publication rules (``publish``), the end-of-build site check (``site_check``), the second language's
completeness (``translations``), the built site in headless Chromium (``browser``) and vllm-ascend's own
end-to-end settings (``e2e``).

May import: ``core``, ``inputs``, ``engine``, ``record``, ``measure``.
"""
