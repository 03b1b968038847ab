"""The zoo (names, 16 Table II rows, tiny variants), weight resolution without network,
loading real-format checkpoints from a folder, `probench models`, and cross-process
determinism of the tiny models."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.tiny_adapters import PROMPTS, TINY, digest, fresh, image, shared
from probench.cli import main
from probench.errors import UsageError
from probench.models import ZOO, list_models, load_detector
from probench.models.errors import UnknownModelError, WeightsNotFoundError
from probench.models.zoo import resolve, tiny_names, weights_present

HF_SPECS = [s for s in list_models() if s.backend == "transformers"]


def _paper_rows() -> list[str]:
    from probench.report.paper import table2_path

    with table2_path().open() as fh:
        return [r["model"] for r in csv.DictReader(fh)]


def test_zoo_has_the_16_table2_rows_in_order() -> None:
    assert [s.paper_name for s in list_models()] == _paper_rows()
    assert len(ZOO) == 16


def test_transformers_rows_are_complete() -> None:
    assert {s.paper_name for s in HF_SPECS} == {
        "SAM3-Lite", "OWLv2-L", "OWLv2-B", "SAM3", "OmDet-T", "OWL-ViT", "G-DINO-S-T", "G-DINO-T",
        "LLMDet-L", "MM-G-D-L", "MM-G-D-T",
    }
    for s in HF_SPECS:
        assert "/" in s.checkpoint and s.factory and s.tiny_factory and s.notes
        caps = s.capabilities.as_dict()
        assert set(caps) >= {"masks", "tensorrt", "onnx", "batched", "text_cache", "accel"}
        assert s.installable_here()


def test_tiny_names_and_alias() -> None:
    names = tiny_names()
    assert "tiny-owlv2" in names
    assert {f"tiny-{s.name}" for s in HF_SPECS} <= set(names)
    spec, tiny = resolve("tiny-owlv2")
    assert (spec.name, tiny) == ("owlv2-b", True)
    info = shared("tiny-owlv2").model_info
    assert info["name"] == "tiny-owlv2" and info["paper_name"] == "OWLv2-B"
    assert info["random_weights"] is True and info["checkpoint"] == "google/owlv2-base-patch16-ensemble"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"name": "owlv3"}, UnknownModelError),
        ({"name": ""}, UnknownModelError),
        ({"name": "tiny-detic"}, UnknownModelError),
        ({"name": "tiny-owlv2", "precision": "fp16"}, UsageError),  # fp16 needs CUDA
        ({"name": "tiny-owlv2", "precision": "int3"}, UsageError),
        ({"name": "tiny-owlv2", "device": "tpu"}, UsageError),
        ({"name": "tiny-owlv2", "weights": "/tmp"}, UsageError),
        ({"name": "tiny-owlv2", "random_weights": True}, UsageError),
    ],
)
def test_load_errors_are_clear(kwargs: dict, error: type) -> None:
    name = kwargs.pop("name")
    with pytest.raises(error):
        load_detector(name, **kwargs)


@pytest.mark.parametrize("spec", HF_SPECS, ids=lambda s: s.name)
def test_missing_weights_name_checkpoint_and_fetch_command(
    spec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    assert not weights_present(spec)
    with pytest.raises(WeightsNotFoundError) as exc:
        load_detector(spec.name)
    msg = str(exc.value)
    assert spec.checkpoint in msg
    assert f"hf download {spec.checkpoint}" in msg and "huggingface-cli download" in msg
    with pytest.raises(WeightsNotFoundError, match=r"no config\.json"):
        load_detector(spec.name, weights=str(tmp_path / "not-a-checkpoint"))


def _save_checkpoint(name: str, folder: Path) -> None:
    """Write a tiny model in the published checkpoint layout (model + processor files)."""
    import transformers as tf

    det = fresh(name)
    det.model.save_pretrained(folder)
    proc_cls = {
        "owl": tf.Owlv2Processor, "grounding-dino": tf.GroundingDinoProcessor,
        "mm-grounding-dino": tf.GroundingDinoProcessor, "sam3": tf.Sam3Processor,
    }[resolve(name)[0].family]
    proc_cls(image_processor=det.image_processor, tokenizer=det.tokenizer).save_pretrained(folder)


@pytest.mark.parametrize(
    ("tiny", "real"),
    [("tiny-owlv2", "owlv2-b"), ("tiny-grounding-dino-t", "grounding-dino-t"), ("tiny-sam3", "sam3")],
)
def test_real_loading_path_from_a_checkpoint_folder(tiny: str, real: str, tmp_path: Path) -> None:
    _save_checkpoint(tiny, tmp_path)
    det = load_detector(real, weights=str(tmp_path))
    assert det.model_info["random_weights"] is False
    assert det.model_info["weights_source"] == str(tmp_path.resolve())
    img = image()
    assert digest(det.detect(img, PROMPTS)) == digest(shared(tiny).detect(img, PROMPTS))


def test_probench_models_json(capsys: pytest.CaptureFixture) -> None:
    assert main(["models", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["models"]
    assert [r["paper_name"] for r in rows] == _paper_rows()
    for r in rows:
        assert set(r) >= {"name", "paper_name", "family", "backend", "checkpoint", "capabilities",
                          "weights_present", "installable", "tiny"}
        assert isinstance(r["weights_present"], bool) and isinstance(r["installable"], bool)
    assert "tiny-owlv2" in out["tiny"]


def test_probench_models_table(capsys: pytest.CaptureFixture) -> None:
    assert main(["models"]) == 0
    text = capsys.readouterr().out
    for s in list_models():
        assert s.name in text and s.paper_name in text
    assert "tiny-owlv2" in text


_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from helpers.tiny_adapters import PROMPTS, TINY, digest, image, shared
print(json.dumps({n: digest(shared(n).detect(image(), PROMPTS)) for n in TINY}))
"""


@pytest.mark.slow
def test_tiny_models_predict_the_same_in_every_process() -> None:
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    here = str(Path(__file__).parent.parent)  # test/, where the helpers package lives
    procs = [  # two fresh interpreters, side by side
        subprocess.Popen([sys.executable, "-c", _SCRIPT, here], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    a, b = outs
    assert a == b
    assert a == {n: digest(shared(n).detect(image(), PROMPTS)) for n in TINY}  # and this process
