import math

import numpy as np
import pytest

from npu_tutorials import metrics


def test_identical_vectors():
    r = np.array([1.0, -2.0, 3.0, 0.5])
    m = metrics.compare_logits(r, r)
    assert m["nmse_pct"] == 0 and m["max_abs_err"] == 0 and m["kl_nats"] == pytest.approx(0, abs=1e-12)
    assert m["cosine"] == pytest.approx(1.0) and m["top1_match"] == 1.0


def test_known_values():
    ref = np.array([3.0, 4.0])
    x = np.array([3.0, 5.0])
    # mean((x-r)^2) = 0.5; mean(r^2) = 12.5 -> 4 %
    assert metrics.normalized_mse_pct(x, ref) == pytest.approx(4.0)
    assert metrics.cosine(x, ref) == pytest.approx((9 + 20) / (5 * math.sqrt(34)))
    assert metrics.cosine([1, 0], [0, 1]) == pytest.approx(0.0)
    assert metrics.cosine([2, 2], [1, 1]) == pytest.approx(1.0)
    assert metrics.normalized_mse_pct([2, 2], [1, 1]) == pytest.approx(100.0)


def test_kl_of_known_distributions():
    # softmax([0, log 3]) = [0.25, 0.75]; softmax([0, 0]) = [0.5, 0.5]
    ref, x = np.array([0.0, math.log(3)]), np.array([0.0, 0.0])
    expected = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
    assert metrics.kl_divergence(x, ref) == pytest.approx(expected)
    assert metrics.kl_divergence(x + 100, x) == pytest.approx(0.0, abs=1e-12)  # shift-invariant


def test_topk():
    ref = np.array([0.1, 0.9, 0.5, 0.7, 0.3, 0.8])
    x = np.array([0.1, 0.8, 0.5, 0.7, 0.3, 0.9])  # top-1 swapped
    assert list(metrics.topk_ids(ref, 3)) == [1, 5, 3]
    assert metrics.topk_agreement(x, ref, 1) == 0.0
    assert metrics.topk_agreement(x, ref, 2) == 1.0
    m = metrics.compare_logits(x, ref)
    assert (m["engine_top1"], m["reference_top1"]) == (5, 1)


def test_shape_mismatch_and_empty():
    with pytest.raises(ValueError, match="shape mismatch"):
        metrics.compare_logits([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        metrics.cosine([], [])


def test_sequence_match():
    assert metrics.sequence_match([1, 2, 3, 4], [1, 2, 3, 4]) == {"match_rate": 1.0, "first_divergence": None,
                                                                  "length": 4}
    assert metrics.sequence_match([1, 2, 9, 4], [1, 2, 3, 4]) == {"match_rate": 0.75, "first_divergence": 2,
                                                                  "length": 4}
    assert metrics.sequence_match([1], [1, 2]) == {"match_rate": 0.5, "first_divergence": 1, "length": 2}
    assert metrics.sequence_match([7, 2], [1, 2])["first_divergence"] == 0
