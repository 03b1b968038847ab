"""The entry point's target: the plugin's models as data. Keep this module light (no
torch, no model import): ``probench models`` imports it to list the models."""

from __future__ import annotations

from probench.models.spec import Capabilities, ModelSpec

COLOUR = ModelSpec(
    name="example-colour",
    paper_name="Example colour detector",
    family="example",
    backend="numpy",
    checkpoint="",  # nothing to download: the "model" is a few lines of numpy
    capabilities=Capabilities(text_cache="per-prompt"),
    factory="probench_example_plugin.detector:build",
    notes="worked example of a plugin: boxes the pixels of the colour a prompt names",
    requires=("numpy",),
)

SPECS = [COLOUR]  # what the entry point loads: a ModelSpec or a list of them
