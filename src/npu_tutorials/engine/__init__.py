"""Running vLLM: the backend and its devices (``backend``, ``devices``), the commands a tutorial runs and
shows (``commands``, ``deploy``, ``multi_card``), the server and process groups (``server``, ``processes``, ``isolated``),
the benchmark client (``bench``, ``vllm_bench``), the memory-bandwidth probe (``bandwidth``) and the
device and port leases of a parallel build (``scheduler``).

May import: ``core``, ``inputs``.
"""
