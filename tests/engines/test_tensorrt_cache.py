"""TensorRT engine cache keys: a changed model, precision, TensorRT version or GPU never reuses a plan."""

from vlash.engines.tensorrt_cache import EngineCache, cache_key, model_hash, target_name


def _graph(path, payload: bytes):
    path.write_bytes(payload)
    return path


def test_key_changes_with_model_precision_version_and_target(tmp_path):
    graph = _graph(tmp_path / "denoise.onnx", b"graph-a")
    key = cache_key(graph, "fp16", "10.9", "aot-sm89")
    assert key == cache_key(graph, "fp16", "10.9", "aot-sm89")
    assert key != cache_key(graph, "int8", "10.9", "aot-sm89")
    assert key != cache_key(graph, "fp16", "10.10", "aot-sm89")
    assert key != cache_key(graph, "fp16", "10.9", "aot-sm120")
    _graph(graph, b"graph-b")  # the model changed
    assert key != cache_key(graph, "fp16", "10.9", "aot-sm89")


def test_external_weights_are_part_of_the_model_hash(tmp_path):
    graph = _graph(tmp_path / "prefill.onnx", b"graph")
    before = model_hash(graph)
    (tmp_path / "prefill.onnx.data").write_bytes(b"weights")
    assert model_hash(graph) != before


def test_cache_builds_once_per_key_and_rebuilds_when_the_model_changes(tmp_path):
    cache, builds = EngineCache(tmp_path / "cache"), []
    graph = _graph(tmp_path / "denoise.onnx", b"v1")

    def build():
        builds.append(graph.read_bytes())
        return b"plan-" + graph.read_bytes()

    key = cache_key(graph, "fp16", "1.0", "aot-sm89")
    assert cache.get_or_build(key, build) == b"plan-v1"
    assert cache.get_or_build(key, build) == b"plan-v1" and len(builds) == 1
    _graph(graph, b"v2")
    new_key = cache_key(graph, "fp16", "1.0", "aot-sm89")
    assert cache.get_or_build(new_key, build) == b"plan-v2" and len(builds) == 2


def test_aot_target_names():
    assert target_name("SM89") == "aot-sm89"
