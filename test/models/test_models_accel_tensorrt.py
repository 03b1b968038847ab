"""TensorRT path of the OWL detectors, up to the TensorRT calls: a fake ``tensorrt`` module
records what the builder is asked (FP16, profiles, workspace), a fake runner stands in for
the engine. The real engine needs an NVIDIA GPU (none here): untested on GPU."""

from __future__ import annotations

import numpy as np
import pytest

from probench.models.accel.cache import ArtifactCache
from probench.models.accel.errors import ExportError, RuntimeUnavailableError
from probench.models.accel.tensorrt import build_engine, require_tensorrt, to_tensorrt
from probench.models.zoo import load_detector


class FakeTrt:
    """The slice of the tensorrt API build_engine uses, recording every call."""

    __version__ = "10.99-fake"

    def __init__(self, parse_ok: bool = True, build_ok: bool = True) -> None:
        self.parse_ok, self.build_ok = parse_ok, build_ok
        self.calls: list[tuple] = []
        fake = self

        class Logger:
            WARNING = 2

            def __init__(self, level: int) -> None:
                fake.calls.append(("logger", level))

        class Profile:
            def set_shape(self, name, lo, opt, hi):
                fake.calls.append(("shape", name, lo, opt, hi))

        class Config:
            def set_memory_pool_limit(self, pool, size):
                fake.calls.append(("workspace", size))

            def set_flag(self, flag):
                fake.calls.append(("flag", flag))

            def add_optimization_profile(self, profile):
                fake.calls.append(("profile",))

        class Builder:
            def __init__(self, logger):
                pass

            def create_network(self, flags):
                fake.calls.append(("network", flags))
                return "network"

            def create_builder_config(self):
                return Config()

            def create_optimization_profile(self):
                return Profile()

            def build_serialized_network(self, network, config):
                return b"SERIALIZED-ENGINE" if fake.build_ok else None

        class OnnxParser:
            num_errors = 1

            def __init__(self, network, logger):
                pass

            def parse(self, data):
                fake.calls.append(("parse", len(data)))
                return fake.parse_ok

            def get_error(self, i):
                return "unsupported operator Foo"

        class NetworkDefinitionCreationFlag:  # TensorRT 10: no EXPLICIT_BATCH any more
            pass

        class MemoryPoolType:
            WORKSPACE = "workspace"

        class BuilderFlag:
            FP16 = "FP16"

        self.Logger, self.Builder, self.OnnxParser = Logger, Builder, OnnxParser
        self.NetworkDefinitionCreationFlag = NetworkDefinitionCreationFlag
        self.MemoryPoolType, self.BuilderFlag = MemoryPoolType, BuilderFlag


def test_build_engine_fp16_and_profiles(tmp_path) -> None:
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"onnx-bytes")
    trt = FakeTrt()
    out = build_engine(onnx, tmp_path / "m.engine", image_size=64, query_dim=32, trt=trt)
    assert out.read_bytes() == b"SERIALIZED-ENGINE"
    assert ("flag", "FP16") in trt.calls and ("network", 0) in trt.calls
    shapes = {c[1]: c[2:] for c in trt.calls if c[0] == "shape"}
    assert shapes["pixel_values"] == ((1, 3, 64, 64), (1, 3, 64, 64), (1, 3, 64, 64))
    assert shapes["query_embeds"][0] == (1, 1, 32) and shapes["query_embeds"][2][1] >= 100
    trt32 = FakeTrt()
    build_engine(onnx, tmp_path / "m32.engine", image_size=64, query_dim=32, fp16=False, trt=trt32)
    assert not [c for c in trt32.calls if c[0] == "flag"]


def test_build_engine_failures_are_clear(tmp_path) -> None:
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"x")
    with pytest.raises(ExportError, match="unsupported operator Foo"):
        build_engine(onnx, tmp_path / "a.engine", image_size=8, query_dim=4, trt=FakeTrt(parse_ok=False))
    with pytest.raises(ExportError, match="engine build"):
        build_engine(onnx, tmp_path / "b.engine", image_size=8, query_dim=4, trt=FakeTrt(build_ok=False))
    assert not (tmp_path / "a.engine").exists() and not (tmp_path / "b.engine").exists()
    trt11 = FakeTrt()
    trt11.BuilderFlag = type("BuilderFlag", (), {})  # TensorRT 11: no precision flags
    with pytest.raises(ExportError, match="no FP16 builder flag"):
        build_engine(onnx, tmp_path / "c.engine", image_size=8, query_dim=4, trt=trt11)


def test_requires_gpu_and_package() -> None:
    with pytest.raises(RuntimeUnavailableError, match="NVIDIA GPU and the tensorrt package"):
        require_tensorrt("cpu")
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(RuntimeUnavailableError, match="no CUDA device"):
            require_tensorrt("cuda")


def test_owl_engine_built_once_and_not_rebuilt_on_prompt_change(tmp_path) -> None:
    base = load_detector("tiny-owlv2")
    runners = []

    class TorchRunner:
        """Stands in for the engine: runs the same computation in PyTorch."""

        def __init__(self, engine_path, trt=None):
            assert engine_path.read_bytes() == b"SERIALIZED-ENGINE"
            runners.append(self)

        def __call__(self, pixel_values, query_embeds):
            return base._forward(pixel_values, query_embeds)

    cache = ArtifactCache(tmp_path)
    det = to_tensorrt(base, cache, trt=FakeTrt(), runner_cls=TorchRunner)
    assert det.name.endswith("@tensorrt") and cache.builds == 2  # the ONNX file, then the engine
    img = np.random.default_rng(0).integers(0, 256, (80, 120, 3), dtype=np.uint8)
    a = det.detect(img, ["a door", "a car"])
    b = det.detect(img, ["a person", "a cone", "a box"])  # prompt change: text input only
    assert cache.builds == 2 and len(runners) == 1
    ref = base.detect(img, ["a door", "a car"])
    np.testing.assert_allclose(a.xyxy, ref.xyxy)
    assert set(b.prompt_index.tolist()) <= {0, 1, 2}
    to_tensorrt(base, cache, trt=FakeTrt(), runner_cls=TorchRunner)  # same key: cached
    assert cache.builds == 2
    to_tensorrt(base, cache, fp16=False, trt=FakeTrt(), runner_cls=TorchRunner)  # new key
    assert cache.builds == 3
    engines = sorted(p.name for p in tmp_path.glob("owl-trt-*.engine"))
    assert len(engines) == 2


# -- the image-head families (Grounding DINO, OmDet-T, SAM3): generic builder and runner ---


def test_profile_shapes_span_each_prompt_axis() -> None:
    import torch

    from probench.models.accel.errors import AccelError
    from probench.models.accel.head_runtime import profile_shapes
    from probench.models.head import ImageHead

    head = ImageHead("toy", torch.nn.Identity(), ("img", "text", "mask"), ("y",), lambda n: (),
                     {"text": 0, "mask": 1})
    inputs = (torch.zeros(1, 3, 8, 8), torch.zeros(5, 32, 4), torch.zeros(1, 5, dtype=torch.long))
    shapes = profile_shapes(head, inputs, max_prompts=64, opt_prompts=8)
    assert shapes["img"] == ((1, 3, 8, 8),) * 3
    assert shapes["text"] == ((1, 32, 4), (8, 32, 4), (64, 32, 4))
    assert shapes["mask"] == ((1, 1), (1, 8), (1, 64))
    with pytest.raises(AccelError, match="text: 65 along the prompt axis exceed the engine profile"):
        profile_shapes(head, (inputs[0], torch.zeros(65, 32, 4), inputs[2]), max_prompts=64, opt_prompts=8)
    with pytest.raises(ValueError, match="opt"):
        profile_shapes(head, inputs, max_prompts=4, opt_prompts=8)


def test_head_engine_built_once_per_geometry_and_not_on_prompt_change(tmp_path) -> None:
    from probench.models.accel.head_runtime import to_tensorrt as head_to_tensorrt

    base = load_detector("tiny-omdet-turbo")
    eager = load_detector("tiny-omdet-turbo")
    head = eager.image_head()
    runners = []

    class TorchEngine:
        """Stands in for the engine: the eager head, called with the engine's named tensors."""

        def __init__(self, engine_path, input_names, output_names, trt=None):
            assert engine_path.read_bytes() == b"SERIALIZED-ENGINE"
            assert input_names == head.input_names and output_names == head.output_names
            runners.append(self)

        def __call__(self, *inputs):
            return head.module(*inputs)

    trt = FakeTrt()
    cache = ArtifactCache(tmp_path)
    det = head_to_tensorrt(base, cache, trt=trt, engine_runner=TorchEngine)
    assert det.name == "tiny-omdet-turbo@tensorrt"
    img = np.random.default_rng(0).integers(0, 256, (80, 120, 3), dtype=np.uint8)
    a = det.detect(img, ["a door", "a car"])
    det.detect(img, ["a person", "a cone", "a box"])  # prompt change: the same engine
    assert cache.builds == 2 and len(runners) == 1  # the ONNX file, then the engine
    assert ("flag", "FP16") in trt.calls
    shapes = {c[1]: c[2:] for c in trt.calls if c[0] == "shape"}
    assert shapes["pixel_values"][0] == shapes["pixel_values"][2] == (1, 3, 64, 64)
    assert shapes["class_features"][0][0] == 1 and shapes["class_features"][2][0] >= 100
    assert shapes["task_mask"][0][1] == 1
    ref = eager.detect(img, ["a door", "a car"])
    np.testing.assert_array_equal(a.xyxy, ref.xyxy)
    assert len(list(tmp_path.glob("omdet-trt-*.engine"))) == 1


def test_head_tensorrt_refused_without_a_gpu() -> None:
    from probench.models.accel.head_runtime import to_tensorrt as head_to_tensorrt

    with pytest.raises(RuntimeUnavailableError, match="NVIDIA GPU and the tensorrt package"):
        head_to_tensorrt(load_detector("tiny-sam3"))
