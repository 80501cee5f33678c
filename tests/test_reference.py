"""The fp32 reference: batched greedy decoding gives each prompt's own unbatched continuation."""

from npu_tutorials.measure import reference

PROMPTS = ["Hello, how are you?", "What is 2+2?", "The capital of France is",
           "Explain the theory of relativity in simple terms:", "def quicksort(arr):\n"]


def test_batched_greedy_equals_one_prompt_at_a_time(tiny):
    ids = [reference.tokenize(tiny.path, p) for p in PROMPTS]
    assert len({len(i) for i in ids}) > 1  # unequal lengths: the batch is left-padded
    one = [reference.greedy(tiny.path, i, 12) for i in ids]
    assert reference.greedy_batch(tiny.path, ids, 12) == one
    j, k = next((j, k) for j in range(len(one)) for k in range(1, 12) if one[j][k] not in one[j][:k])
    stop = [one[j][k]]  # a stop token prompt j meets first at step k + 1
    cut = [reference.greedy(tiny.path, i, 12, stop) for i in ids]
    assert len(cut[j]) == k + 1 and cut[j][-1] == stop[0]
    assert reference.greedy_batch(tiny.path, ids, 12, stop) == cut


def test_a_prefetch_is_waited_for_and_loads_once(tiny, tmp_path, monkeypatch):
    import pytest

    reference.release()
    loads = []
    import transformers  # load_model imports it inside: count its loads there

    orig = transformers.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: loads.append(a[0]) or orig(*a, **k))
    t = reference.prefetch(tiny.path)
    model = reference.load_model(str(tiny.path))  # waits for the prefetch, does not load again
    t.join()
    assert reference.load_model(str(tiny.path)) is model and loads == [str(tiny.path)]
    # a prefetch that fails leaves nothing behind; the step that needs the model gets the error itself
    reference.prefetch(tmp_path / "missing").join()
    with pytest.raises(OSError):
        reference.load_model(str(tmp_path / "missing"))
    reference.release()
