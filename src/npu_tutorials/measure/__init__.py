"""What a tutorial measures and how it is judged: logits and text metrics (``metrics``, ``accuracy``,
``consistency``) against the fp32 reference (``reference``), efficiency and statistics
(``efficiency``, ``stats``), task accuracy (``tasks``) and the tuning sweep's plan (``tuning_plan``).

May import: ``core``, ``inputs``, ``engine``, ``record``.
"""
