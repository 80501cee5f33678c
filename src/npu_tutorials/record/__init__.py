"""The results document: its models (``schema``, ``schema_base``, ``schema_perf``) and their generated
reference page (``schema_doc``), where documents are written and read (``results``), and the headline
figures drawn from one (``headline``).

May import: ``core``, ``inputs``, ``engine``.
"""
