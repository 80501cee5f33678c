"""Qwen's byte-level BPE tokenizer, rebuilt offline from its BPE ranks.

No model hub is needed: the 151,643 ranks of Qwen's tokenizer ship inside the
``dashscope`` wheel as ``qwen.tiktoken`` (lines of ``base64(token) rank``).
From them we build a Hugging Face ``tokenizer.json`` whose ids equal the
official Qwen2.5 ``vocab.json`` (a test checks every id).
"""

from __future__ import annotations

import base64
import json
from functools import lru_cache
from pathlib import Path

from ..core.errors import TutorialError

# Qwen's pre-tokenisation pattern (first generation and Qwen2/2.5 alike).
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
NUM_BPE_RANKS = 151_643


def tiktoken_file() -> Path:
    """Path of ``qwen.tiktoken`` inside the installed ``dashscope`` package."""
    try:
        import dashscope
    except ImportError:
        raise TutorialError("the Qwen BPE ranks come from the 'dashscope' package: pip install dashscope") from None
    path = Path(dashscope.__file__).parent / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise TutorialError(f"{path} is missing: this dashscope release does not ship qwen.tiktoken")
    return path


@lru_cache(maxsize=2)
def load_ranks(path: str | None = None) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    text = Path(path or tiktoken_file()).read_text(encoding="ascii")
    for line in text.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    if len(ranks) != NUM_BPE_RANKS or sorted(ranks.values()) != list(range(NUM_BPE_RANKS)):
        raise TutorialError(f"{path or tiktoken_file()}: expected ranks 0..{NUM_BPE_RANKS - 1}")
    return ranks


def _byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Byte-level vocabulary and the merge list that reproduces BPE by rank.

    A token of rank r is the merge of every split (left, right) whose halves
    are both tokens; merges are ordered by the rank of their result, so the
    Hugging Face BPE applies them in the order tiktoken would.
    """
    enc = _byte_to_unicode()

    def as_str(b: bytes) -> str:
        return "".join(enc[x] for x in b)

    vocab = {as_str(tok): rank for tok, rank in ranks.items()}
    merges: list[tuple[int, int, int, bytes, bytes]] = []
    for tok, rank in ranks.items():
        for i in range(1, len(tok)):
            left, right = tok[:i], tok[i:]
            if left in ranks and right in ranks:
                merges.append((rank, ranks[left], ranks[right], left, right))
    merges.sort()
    return vocab, [(as_str(l), as_str(r)) for _, _, _, l, r in merges]


@lru_cache(maxsize=2)
def _bpe(ranks_path: str | None) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """:func:`vocab_and_merges` of a ranks file, made once per process (seconds; every Qwen2-layout
    stand-in writes the same); callers only read it."""
    return vocab_and_merges(load_ranks(ranks_path))


def build_tokenizer_json(special_tokens: dict[int, tuple[str, bool]], ranks_path: str | None = None) -> str:
    """Serialised ``tokenizer.json`` for Qwen's BPE plus the given added tokens.

    ``special_tokens`` maps id -> (content, special).
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    vocab, merges = _bpe(ranks_path)
    tok = Tokenizer(BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    for idx in sorted(special_tokens):
        content, special = special_tokens[idx]
        if idx != tok.get_vocab_size(with_added_tokens=True):
            raise TutorialError(f"added token {content!r} must take id {tok.get_vocab_size(True)}, not {idx}")
        added = AddedToken(content, normalized=False, special=special)
        tok.add_special_tokens([added]) if special else tok.add_tokens([added])
    return tok.to_str()


def added_tokens_from_config(tokenizer_config: dict) -> dict[int, tuple[str, bool]]:
    """id -> (content, special) from a tokenizer_config.json's added_tokens_decoder."""
    return {int(i): (t["content"], bool(t["special"])) for i, t in tokenizer_config["added_tokens_decoder"].items()}


def write_qwen2_tokenizer(out_dir: Path, tokenizer_config: dict) -> None:
    """Write tokenizer.json, vocab.json and merges.txt for a Qwen2-layout checkpoint."""
    text = build_tokenizer_json(added_tokens_from_config(tokenizer_config))
    (out_dir / "tokenizer.json").write_text(text, encoding="utf-8")
    vocab, merges = _bpe(None)
    (out_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out_dir / "merges.txt").write_text(
        "#version: 0.2\n" + "\n".join(f"{l} {r}" for l, r in merges) + "\n", encoding="utf-8"
    )
