"""Every NPU tuning knob of the cards, with its source, against what the pinned vLLM and vllm-ascend accept.

The accepted names come from ``src/npu_tutorials/data/pinned/schema.json``, an extract of vLLM 0.23.0's
and vllm-ascend v0.23.0's own source (``scripts/extract_pinned_schema.py``; no network at test time).  The
other supported releases' extracts, and the check against the installed one: tests/test_pinned_versions.py.
"""

import copy
import json

import pytest
import yaml

from npu_tutorials.engine import commands as C
from npu_tutorials.inputs import knobs, releases
from npu_tutorials.inputs.cards import CARDS_DIR, Knob, known_models, load_card, load_card_file
from npu_tutorials.core.errors import TutorialError
from conftest import require_vllm  # noqa: E402


def npu_knobs():
    return [(key, k) for key in known_models() for k in (load_card(key).tuning.knobs if load_card(key).tuning else [])
            if "npu" in k.backends]


def test_the_extract_names_its_sources_and_the_pinned_releases():
    s = knobs.pinned_schema()
    assert s["vllm"]["version"] == C.VLLM_ASCEND_STACK["vllm"]  # the vLLM vllm-ascend v0.23.0 pairs with
    assert s["vllm_ascend"]["tag"] == C.VLLM_ASCEND_TAG
    assert s["vllm_ascend"]["commit"].startswith(knobs.VLLM_ASCEND_SOURCE.split("commit ")[1].rstrip(")"))
    assert s["vllm"]["files"]["engine_flags"] == "vllm/engine/arg_utils.py"
    assert "vllm_ascend/ascend_config.py" in s["vllm_ascend"]["files"]["additional_config_keys"]
    assert "optimization_and_tuning.md" in s["vllm_ascend"]["files"]["documented_env"]
    # what a knob needs is there, and what nobody accepts is not
    assert {"--async-scheduling", "--block-size", "--compilation-config", "--additional-config",
            "--max-num-batched-tokens"} <= set(s["vllm"]["engine_flags"])
    assert "FULL_DECODE_ONLY" in s["vllm"]["cudagraph_modes"] and "cudagraph_mode" in s["vllm"]["compilation_config_keys"]
    assert s["vllm_ascend"]["weight_prefetch_config_keys"] == ["enabled", "prefetch_ratio"]
    assert "--no-such-flag" not in s["vllm"]["engine_flags"]
    assert knobs.VLLM_ASCEND_ADDITIONAL_CONFIG_KEYS == frozenset(s["vllm_ascend"]["additional_config_keys"])


def test_every_npu_knob_lists_its_source_and_holds_against_the_pinned_release():
    listed = npu_knobs()
    assert listed, "no card has an NPU knob"
    for key, k in listed:
        assert k.source.strip(), (key, k.name)
        assert "vllm-ascend" in k.source and ("#" in k.source or ".md" in k.source), (key, k.name, k.source)
        assert k.why.strip(), (key, k.name)
        assert knobs.knob_problems(k) == [], (key, k.name)
    table = "\n".join(f"{key} | {k.name} | {' '.join(k.flags)} {k.env} | {k.source}" for key, k in listed)
    print(table)  # the list, with sources, in the test's output (pytest -s)


def test_the_npu_knobs_cover_the_guide_and_the_reports():
    """vllm-ascend's optimization and tuning guide (v0.23.0) and the deployers' reports (issue #13562)."""
    ks = [k for _, k in npu_knobs()]
    env = {(v, x) for k in ks for v, x in k.env.items()}
    flags = [k.flags for k in ks]
    assert ("TASK_QUEUE_ENABLE", "2") in env and ("TASK_QUEUE_ENABLE", "1") in env
    assert ("CPU_AFFINITY_CONF", "1") in env
    assert ("LD_PRELOAD", "/usr/lib/{machine}-linux-gnu/libjemalloc.so.2") in env
    assert ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}'] in flags
    assert ["--async-scheduling"] in flags and ["--block-size", "128"] in flags
    assert any(f[:1] == ["--max-num-batched-tokens"] for f in flags)
    assert any(f[:1] == ["--additional-config"] and json.loads(f[1]) == {"weight_prefetch_config": {"enabled": True}}
               for f in flags)
    hccl = [k for k in ks if "HCCL_OP_EXPANSION_MODE" in k.env]
    assert hccl and all(k.min_devices >= 2 and "several cards" in k.why for k in hccl)
    assert all(k.min_devices == 1 for k in ks if k not in hccl)
    guide = "optimization_and_tuning.md"
    assert {k.name for k in ks if guide in k.source} >= {"task queue level 2", "CPU affinity", "jemalloc",
                                                         "HCCL AIV expansion"}
    assert len([k for k in ks if "#13562" in k.source]) >= 8


def test_what_the_pinned_release_already_does_or_later_ones_no_longer_read_is_said_on_the_knob():
    """vLLM 0.23.0 turns async scheduling on by itself (vllm/config/vllm.py:957-997) and vllm-ascend v0.23.0 sets a
    128-token block with chunked prefill or prefix caching on (vllm_ascend/utils.py:1402-1406): no-ops there, each
    with its source; weight_prefetch_config is read up to v0.23.0 only (vllm-ascend #11949 removed it)."""
    ks = {k.name: k for _, k in npu_knobs()}
    assert {n for n, k in ks.items() if k.baseline} == {"async scheduling", "block size 128"}
    assert "vllm/config/vllm.py:957-997" in ks["async scheduling"].baseline
    assert "refresh_block_size" in ks["block size 128"].baseline
    assert {n: (k.read_until, k.removed_by) for n, k in ks.items() if k.read_until} == {
        "weight prefetch": ("v0.23.0", "vllm-ascend #11949")}
    # the why-texts the v0.23.0 sources contradicted
    assert "FULL_AND_PIECEWISE already replays uniform decode batches as full ACL graphs" in ks["full decode graph"].why
    assert "every Ascend chip" in ks["8192 batched tokens"].why and "a 910B's" not in ks["8192 batched tokens"].why
    assert "enable_cpu_binding" in ks["CPU affinity"].why
    assert knobs.release_tuple("v0.23.0") == knobs.release_tuple("0.23.0.post1") == (0, 23, 0)
    assert knobs.release_tuple("0.24.0rc1") == (0, 24, 0) and knobs.release_tuple("main") is None


@pytest.mark.parametrize("fields, problem", [
    (dict(read_until="latest", removed_by="vllm-ascend #1"), "read_until 'latest' is not a release"),
    (dict(read_until="v0.23.0"), "read_until and removed_by go together"),
    (dict(removed_by="vllm-ascend #1"), "read_until and removed_by go together"),
])
def test_a_removal_names_the_last_release_and_the_change(fields, problem):
    with pytest.raises(ValueError, match=problem):
        Knob(**{**KNOB, "backends": ["cuda"], **fields})


def test_cpu_and_cuda_knobs_are_as_they_were():
    card = load_card("palmyra-mini")
    cpu = {k.name: k.env for k in card.tuning.knobs if k.backends == ["cpu"]}
    assert cpu == {"no thread binding": {"VLLM_CPU_OMP_THREADS_BIND": "nobind"},
                   "one reserved core": {"VLLM_CPU_NUM_OF_RESERVED_CPU": "1"},
                   "8 GiB KV cache": {"VLLM_CPU_KVCACHE_SPACE": "8"}}
    cuda = [k for k in card.tuning.knobs if "cuda" in k.backends]
    assert [(k.name, k.flags) for k in cuda] == [
        ("graph capture sizes 1-16", ["--compilation-config", '{"cudagraph_capture_sizes": [1, 2, 4, 8, 16]}'])]


KNOB = dict(name="k", backends=["npu"], source="vllm-ascend issue #1", why="w")


@pytest.mark.parametrize("fields, problem", [
    (dict(flags=["--async-schedule"]), "--async-schedule is not a flag of vLLM 0.23.0"),
    (dict(flags=["--compilation-config", '{"cudagraph_modes": "FULL"}']), "key 'cudagraph_modes' is not a field"),
    (dict(flags=["--compilation-config", '{"cudagraph_mode": "FULL_DECODE"}']), "cudagraph_mode 'FULL_DECODE'"),
    (dict(flags=["--compilation-config", "FULL_DECODE_ONLY"]), "is not a JSON object"),
    (dict(flags=["--additional-config", '{"weight_prefetch": {"enabled": true}}']),
     "key 'weight_prefetch' is not supported by vllm-ascend v0.23.0"),
    (dict(flags=["--additional-config", '{"weight_prefetch_config": {"enable": true}}']),
     "weight_prefetch_config key 'enable'"),
    (dict(flags=["--numa-bind"]), "--numa-bind: replaced by --additional-config"),
    (dict(flags=["8192"]), "'8192' follows no flag"),
    (dict(env={"TASK_QUEUE_ENABLED": "1"}), "TASK_QUEUE_ENABLED: none of vllm-ascend v0.23.0's performance documents"),
    (dict(env={"TASK_QUEUE_ENABLE": "3"}), "TASK_QUEUE_ENABLE=3: vllm-ascend v0.23.0's documents set 1 or 2"),
])
def test_a_misspelt_renamed_or_unknown_knob_is_named(fields, problem):
    k = Knob(**{**KNOB, "backends": ["cuda"], **fields})  # not validated as an NPU knob: checked here
    assert any(problem in p for p in knobs.knob_problems(k)), knobs.knob_problems(k)
    with pytest.raises(ValueError, match="knob 'k'"):
        Knob(**{**KNOB, **fields})


def test_a_card_with_a_bad_npu_knob_fails_in_one_line(tmp_path):
    data = yaml.safe_load((CARDS_DIR / "palmyra-mini.yaml").read_text())
    bad = copy.deepcopy(data)
    next(k for k in bad["tuning"]["knobs"] if k["name"] == "async scheduling")["flags"] = ["--async-schedule"]
    path = tmp_path / "palmyra-mini.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(TutorialError) as e:
        load_card_file(path)
    assert "\n" not in str(e.value) and "knob 'async scheduling': --async-schedule is not a flag" in str(e.value)
    unsourced = copy.deepcopy(data)
    next(k for k in unsourced["tuning"]["knobs"] if k["name"] == "jemalloc")["source"] = ""
    path.write_text(yaml.safe_dump(unsourced))
    with pytest.raises(TutorialError, match="knob 'jemalloc': an NPU knob names its source"):
        load_card_file(path)


def test_a_knob_the_pinned_release_removed_stops_the_card(monkeypatch):
    """As if the pin moved to a release without --async-scheduling or weight_prefetch_config."""
    s = copy.deepcopy(knobs.pinned_schema())
    s["vllm"]["engine_flags"].remove("--async-scheduling")
    s["vllm_ascend"]["additional_config_keys"].remove("weight_prefetch_config")
    monkeypatch.setattr(releases, "pinned_schema", lambda: s)  # where schema_for reads it
    with pytest.raises(TutorialError, match="knob 'async scheduling': --async-scheduling is not a flag"):
        load_card("palmyra-mini")
    s["vllm"]["engine_flags"].append("--async-scheduling")
    with pytest.raises(TutorialError, match="knob 'weight prefetch': --additional-config key 'weight_prefetch_config'"):
        load_card("palmyra-mini")


def test_cuda_knob_flags_parse_with_the_installed_vllm():
    """The GPU tab's vLLM (the installed vllm-cpu is the same release's parser) accepts the CUDA knobs."""
    require_vllm()
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    for key in known_models():
        card = load_card(key)
        for k in (card.tuning.knobs if card.tuning else []):
            if "cuda" in k.backends:
                args = parser.parse_args(["--model", "./m", *k.flags])
                assert args.compilation_config is not None, k.name


# -- merging knobs into one server ------------------------------------------------------------------------

def _k(name, flags=(), env=None):
    return Knob(name=name, backends=["cpu"], flags=list(flags), env=env or {})


def test_json_flags_merge_key_by_key_and_a_single_knob_is_itself():
    graph = _k("graph", ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}'])
    sizes = _k("sizes", ["--compilation-config", '{"cudagraph_capture_sizes": [1, 2, 4, 8, 16]}'])
    tq = _k("tq", env={"TASK_QUEUE_ENABLE": "1"})
    flags, env = knobs.merge([graph, sizes, tq, _k("async", ["--async-scheduling"])])
    assert flags == ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY", '
                                             '"cudagraph_capture_sizes": [1, 2, 4, 8, 16]}', "--async-scheduling"]
    assert env == {"TASK_QUEUE_ENABLE": "1"}
    for k in load_card("palmyra-mini").tuning.knobs:
        assert knobs.merge([k]) == (k.flags, k.env), k.name


@pytest.mark.parametrize("a, b, what", [
    (_k("tq1", env={"TASK_QUEUE_ENABLE": "1"}), _k("tq2", env={"TASK_QUEUE_ENABLE": "2"}), "TASK_QUEUE_ENABLE"),
    (_k("a", ["--max-num-batched-tokens", "4096"]), _k("b", ["--max-num-batched-tokens=8192"]),
     "--max-num-batched-tokens"),
    (_k("a", ["--compilation-config", '{"cudagraph_mode": "FULL"}']),
     _k("b", ["--compilation-config", '{"cudagraph_mode": "PIECEWISE"}']), "--compilation-config.cudagraph_mode"),
])
def test_knobs_that_set_one_thing_differently_do_not_combine(a, b, what):
    with pytest.raises(TutorialError, match=f"knobs 'a?.*' and .* set {what} differently"):
        knobs.merge([a, b])
    assert not knobs.combinable([a, b]) and knobs.combinable([a]) and knobs.combinable([b])


def test_a_preload_goes_in_front_of_the_hosts_and_says_when_it_is_already_there():
    lib = "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"
    env = knobs.resolve_env({"LD_PRELOAD": "/usr/lib/{machine}-linux-gnu/libjemalloc.so.2"}, "aarch64",
                            {"LD_PRELOAD": "/usr/local/lib/libx.so"})
    assert env == {"LD_PRELOAD": f"{lib}:/usr/local/lib/libx.so"}
    assert knobs.in_effect(env, {"LD_PRELOAD": "/usr/local/lib/libx.so"}) == []
    assert knobs.in_effect({"LD_PRELOAD": lib}, {"LD_PRELOAD": f"/x.so {lib}"}) == [f"LD_PRELOAD with {lib}"]
    assert knobs.in_effect({"TASK_QUEUE_ENABLE": "2"}, {"TASK_QUEUE_ENABLE": "2"}) == ["TASK_QUEUE_ENABLE=2"]


def test_the_extractor_reads_flags_keys_and_exported_settings_from_source():
    """scripts/extract_pinned_schema.py on small sources shaped like vLLM's and vllm-ascend's."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "extract_pinned_schema.py"
    spec = importlib.util.spec_from_file_location("extract_pinned_schema", path)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    args = 'g.add_argument("--block-size", **kw)\ng.add_argument(\n    "--compilation-config", "-cc", **kw)\n'
    assert ex.engine_flags(args) == ["--block-size", "--compilation-config"]
    config = ('class CUDAGraphMode(enum.Enum):\n    NONE = 0\n    FULL_DECODE_ONLY = (2, 0)\n'
              'class CompilationConfig:\n    cudagraph_mode: int = 0\n    _private = 1\n')
    assert ex.enum_members(config, "CUDAGraphMode") == ["NONE", "FULL_DECODE_ONLY"]
    assert ex.class_fields(config, "CompilationConfig") == ["cudagraph_mode"]
    ascend = ('class AscendConfig:\n    def __init__(self, c):\n        additional_config = c.additional_config\n'
              '        self.a = additional_config.get("enable_x", False)\n        self.b = additional_config["y"]\n'
              '        self.c = self._get_config_value(additional_config, "z", "VLLM_Z", 0)\n'
              'class WeightPrefetchConfig:\n    def __init__(self, weight_prefetch_config):\n'
              '        self.enabled = weight_prefetch_config.get("enabled", False)\n'
              'def init(additional_config):\n    return additional_config.get("refresh", False)\n')
    assert ex.keys_read(ascend, "additional_config") == ["enable_x", "refresh", "y", "z"]
    assert ex.keys_read(ascend, "weight_prefetch_config", "WeightPrefetchConfig") == ["enabled"]
    # a class a later tag removed (vllm-ascend #11949: WeightPrefetchConfig) is absent, not an error
    assert ex.has_class(ascend, "WeightPrefetchConfig") and not ex.has_class(ascend, "SchedulerConfig")
    doc = '## 2. Scheduling\n\n```bash\n# not a heading\nexport TASK_QUEUE_ENABLE=2\nexport MODE="AIV"\n```\n'
    assert ex.exported(doc, "g.md") == {"TASK_QUEUE_ENABLE": [{"value": "2", "file": "g.md", "section": "2. Scheduling"}],
                                        "MODE": [{"value": "AIV", "file": "g.md", "section": "2. Scheduling"}]}
