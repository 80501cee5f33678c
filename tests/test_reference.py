"""The fp32 reference: its greedy tokens checked along another model's are its own greedy tokens."""

import numpy as np

from npu_tutorials.measure import reference

PROMPTS = ["Hello, how are you?", "What is 2+2?", "The capital of France is",
           "Explain the theory of relativity in simple terms:", "def quicksort(arr):\n"]


def test_greedy_along_an_agreeing_sequence_is_the_references_own(tiny):
    prompts = [reference.tokenize(tiny.path, p) for p in PROMPTS]
    assert len({len(i) for i in prompts}) > 1  # unequal lengths: the batch is padded
    owns = [reference.greedy(tiny.path, i, 12) for i in prompts]
    for ids, own, (toks, fed) in zip(prompts, owns, reference.greedy_along(tiny.path, prompts, owns, 12)):
        assert toks == own and len(fed) == 12
        # each row is the logits that chose that token, as a forward pass over its own prefix gives them
        for j in (0, 5, 11):
            np.testing.assert_allclose(fed[j], reference.last_logits(tiny.path, ids + own[:j]), atol=1e-4)
            assert int(fed[j].argmax()) == own[j]


def test_greedy_along_a_disagreeing_sequence_goes_on_alone(tiny):
    ids = reference.tokenize(tiny.path, PROMPTS[0])
    own = reference.greedy(tiny.path, ids, 12)
    wrong = own[:4] + [(own[4] + 1) % 1000] + own[5:]  # another model chose otherwise at position 4
    [(toks, fed)] = reference.greedy_along(tiny.path, [ids], [wrong], 12)
    assert toks == own and len(fed) == 5  # rows up to the disagreement: the prefixes both were fed
    [short] = reference.greedy_along(tiny.path, [ids], [own[:3]], 12)  # the other model stopped early
    assert short[0] == own and len(short[1]) == 4


def test_greedy_along_stops_where_the_reference_stops(tiny):
    ids = reference.tokenize(tiny.path, PROMPTS[1])
    own = reference.greedy(tiny.path, ids, 12)
    k = next(k for k in range(1, 12) if own[k] not in own[:k])
    stop = [own[k]]  # a stop token the reference meets first at step k + 1
    cut = reference.greedy(tiny.path, ids, 12, stop)
    assert len(cut) == k + 1 and cut[-1] == stop[0]
    went_on, stopped = reference.greedy_along(tiny.path, [ids, ids], [own, own[:2]], 12, stop)
    assert went_on[0] == cut and stopped[0] == cut  # the other model went on, or stopped early

