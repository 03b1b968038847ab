"""Models: one detector interface over every open-vocabulary model of the paper.

Importing this package is cheap: adapters import torch/transformers/ultralytics lazily.
"""

from probench.models.base import BaseDetector, Detector, check_image, check_prompts
from probench.models.spec import ModelSpec
from probench.models.zoo import ZOO, list_models, load_detector

__all__ = [
    "ZOO",
    "BaseDetector",
    "Detector",
    "ModelSpec",
    "check_image",
    "check_prompts",
    "list_models",
    "load_detector",
]
