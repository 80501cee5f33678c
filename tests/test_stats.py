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


def test_format_summary():
    assert stats.format_summary(stats.summarize([11.9, 12.3, 12.8, 12.0, 12.5]), unit="ms") == \
        "12.3 ms (IQR 12–12.5, n=5)"
    assert stats.format_summary(stats.summarize([42.0])) == "42 (n=1)"


def test_relative_difference_and_iqr():
    assert stats.relative_difference(110, 90) == pytest.approx(0.2)
    assert stats.relative_difference(0, 0) == 0.0
    assert stats.relative_iqr(stats.summarize([1, 2, 3, 4, 5])) == pytest.approx(2 / 3)


def test_a_stat_reads_as_median_spread_and_sample_size():
    from npu_tutorials.record.schema import Stat

    assert Stat.of([1.0, 2.0, 3.0]).text(2, "ms") == "2.00 ms (IQR 1.50–2.50, n=3)"
    assert Stat.of([4.0]).text() == "4.0 (n=1)"
