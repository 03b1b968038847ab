"""Zoo entry of the detectron2-backed Table II row: Detic (light: no heavy import).

Detic needs detectron2 (not on PyPI; it compiles C++/CUDA ops against the installed torch)
and the Detic repository (with its CenterNet2 submodule) on ``sys.path``; neither installs
in this project's environment, so the row is listed but ``installable_here()`` is False and
there is no ``tiny-detic``. The adapter (:mod:`probench.models.detic`) is written against
Detic's own demo code and is UNTESTED here.

What makes it work (e.g. in a CUDA docker image)::

    pip install 'git+https://github.com/facebookresearch/detectron2.git'
    git clone --recursive https://github.com/facebookresearch/Detic.git
    pip install -r Detic/requirements.txt        # CLIP, timm, ...
    export PYTHONPATH=$PWD/Detic:$PWD/Detic/third_party/CenterNet2:$PYTHONPATH
    # weights: models/Detic_LCOCOI21k_CLIP_SwinB_896b32_4x_ft4x_max-size.pth (Detic model zoo)
    #          and the CLIP ViT-B/32 text encoder for the custom vocabulary
    probench infer --model detic --weights /path/to/Detic ...
"""

from __future__ import annotations

from probench.models.spec import Capabilities, ModelSpec

CHECKPOINT = "Detic_LCOCOI21k_CLIP_SwinB_896b32_4x_ft4x_max-size.pth"
CONFIG = "configs/Detic_LCOCOI21k_CLIP_SwinB_896b32_4x_ft4x_max-size.yaml"

INSTALL_HINT = (
    "Detic needs detectron2 (build from source: pip install "
    "'git+https://github.com/facebookresearch/detectron2.git') and the Detic repo with "
    "CenterNet2 on PYTHONPATH (git clone --recursive https://github.com/facebookresearch/Detic); "
    "see docs/ACCELERATION.md"
)

SPECS: list[ModelSpec] = [
    ModelSpec(
        name="detic",
        paper_name="Detic",
        family="detic",
        backend="detectron2",
        checkpoint=CHECKPOINT,
        capabilities=Capabilities(masks=True, text_cache="per-prompt"),
        factory="probench.models.detic:build",
        tiny_factory=None,  # detectron2 does not install here: no tiny variant to test with
        notes=(
            "ASSUMED checkpoint: the paper does not name the Detic variant; the Detic demo's "
            "default (CenterNet2, Swin-B, LVIS+COCO+ImageNet-21k, CLIP classifier) is used. "
            "Custom vocabulary: each prompt embedded by CLIP ViT-B/32 as Detic's demo does "
            "('a ' + prompt). Adapter UNTESTED: detectron2 is not installable in this environment."
        ),
        install_hint=INSTALL_HINT,
        requires=("torch", "detectron2", "detic", "centernet"),
    ),
]
