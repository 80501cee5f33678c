"""What a tutorial starts from: model cards (``cards``) and their pinned engine knobs (``knobs``), the
gallery's list of tutorials (``gallery_index``), checkpoints (stand-in layouts and planted weights:
``layouts``, ``planted``, ``standin``; the first-generation QWen converter ``convert``; ``tokenizer``;
resolving real or stand-in ``weights``) and the cache they live in (``cache``).

May import: ``core``.
"""
