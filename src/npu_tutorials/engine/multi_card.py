"""Several cards of one host: one server per card, data parallelism and tensor parallelism, as copy-paste
recipes of the "Deploy it yourself" section (the NPU and GPU tabs), built from :mod:`.deploy`'s serve command."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from math import prod

from . import commands as C
from .deploy import reader_place, serve_argv
from .platform import platform_for
from ..inputs.cards import Card
from ..inputs.layouts import for_config


def tp_sizes(card: Card) -> list[int]:
    """Tensor-parallel sizes the model's attention splits into: the heads divide evenly, and the KV heads
    divide evenly or are replicated."""
    cfg = card.config
    heads = int(cfg["num_attention_heads"])
    kv = int(cfg.get("num_key_value_heads", heads))
    return [t for t in (2, 4, 8, 16) if heads % t == 0 and (kv % t == 0 or t % kv == 0)]


def weights_gb(card: Card) -> float:
    nbytes = 4 if card.serve.dtype == "float32" else 2
    return sum(prod(s) for _, s, _ in for_config(card.config).parameters(card.config)) * nbytes / 1e9


@dataclass(frozen=True)
class Recipe:
    key: str
    title: str
    why: str
    env: dict
    argv: list  # one server's argv (the replicas' first)
    text: str


def multi_card(card: Card, backend: str) -> list[Recipe]:
    """One server per card, data parallelism (both for a card that serves on one device) and tensor
    parallelism, on ``card.deploy.cards`` cards of one host."""
    n = card.deploy.cards
    plat = platform_for(backend)
    var = plat.visible_devices_var
    engine = {k: v for k, v in plat.serve_env(card).items() if k != var}
    place = reader_place(card)
    host = plat.listen_host(host_network=True)  # vllm-ascend's multi-card container shares the host's network
    out = []
    if card.serve.tensor_parallel_size == 1:
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in engine.items())
        body = C.format_command(serve_argv(card, backend, replace(place, port=0), host=host))
        assert "--port 0" in body
        body = body.replace("--port 0", "--port $((8000 + i))")
        loop = (f"{exports}for i in $(seq 0 {n - 1}); do\n  {var}=$i nohup "
                + body.replace("\n", "\n  ") + " \\\n      > server-$i.log 2>&1 &\ndone")
        out.append(Recipe("replicas", f"One server per card ({n} ports)",
                          f"the most throughput for a model that fits one card (weights about "
                          f"{weights_gb(card):.1f} GB in {card.serve.dtype}) and independent failures; put a "
                          f"load balancer on this host over ports 8000-{8000 + n - 1} in front.", {var: "0"},
                          serve_argv(card, backend, place, host=host), loop))
        dp_argv = serve_argv(card, backend, place, host=host, extra=["--data-parallel-size", str(n)])
        dp_env = {var: ",".join(str(i) for i in range(n)), **engine}
        out.append(Recipe("dp", f"Data parallelism ({n} cards, one port)",
                          "the same replicas behind one endpoint: vLLM spreads the requests itself.", dp_env,
                          dp_argv, C.format_command(dp_argv, dp_env, exports=True)))
    sizes = [t for t in tp_sizes(card) if t >= card.serve.tensor_parallel_size and t <= n]
    if sizes:
        t = sizes[0] if card.serve.tensor_parallel_size == 1 else card.serve.tensor_parallel_size
        heads = card.config["num_attention_heads"]
        kv = card.config.get("num_key_value_heads", heads)
        tp_argv = serve_argv(card, backend, place, host=host, tensor_parallel_size=t)
        tp_env = {var: ",".join(str(i) for i in range(t)), **engine}
        out.append(Recipe("tp", f"Tensor parallelism ({t} cards, one model split)",
                          f"for a model too large for one card, or a lower latency per request at the cost of "
                          f"traffic between the cards; this model's {heads} attention heads ({kv} KV heads) "
                          f"split {' or '.join(map(str, sizes))} ways.",
                          tp_env, tp_argv, C.format_command(tp_argv, tp_env, exports=True)))
    return out


