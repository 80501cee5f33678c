import pytest

from npu_tutorials.measure import stats


def test_summarize_known_values():
    assert stats.summarize([5, 1, 3, 2, 4]) == {"median": 3.0, "q1": 2.0, "q3": 4.0, "min": 1.0, "max": 5.0, "n": 5}
    s = stats.summarize([10.0, 20.0])
    assert (s["median"], s["q1"], s["q3"], s["n"]) == (15.0, 12.5, 17.5, 2)
    assert stats.summarize([7])["median"] == 7.0 and stats.summarize([7])["n"] == 1


def test_summarize_refuses_empty_and_nan():
    with pytest.raises(ValueError, match="no samples"):
        stats.summarize([])
    with pytest.raises(ValueError, match="non-finite"):
        stats.summarize([1.0, float("nan")])


def test_a_stat_reads_as_median_spread_and_sample_size():
    from npu_tutorials.record.schema import Stat

    assert Stat.of([1.0, 2.0, 3.0]).text(2, "ms") == "2.00 ms (IQR 1.50–2.50, n=3)"
    assert Stat.of([4.0]).text() == "4.0 (n=1)"
