"""The shipped viewer configurations, config/probench.rviz (RViz 2) and
config/probench.foxglove.json (a Foxglove layout): every topic they name is one of the
grounding node's topics in its generated table (``node_spec.TOPICS``), and each shows the
camera image, debug_image, markers, detections_3d, target_pose and the segmentation masks.

The two mask topics (``segmentation/semantic``, ``segmentation/instances``) are being added
to the node by issue 23's work: until they are in TOPICS they are reported as pending here,
and they are the only names allowed to be missing."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from probench.realtime.node_spec import TOPICS

PENDING_MASKS = {"segmentation/semantic", "segmentation/instances"}  # issue 23: added by the lead
SHOWN = {"image", "debug_image", "markers", "detections_3d", "target_pose", *PENDING_MASKS}


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k, v
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def rviz_topics(path: Path) -> set[str]:
    data = yaml.safe_load(path.read_text())
    return {str(v["Value"]) for k, v in _walk(data) if k == "Topic" and isinstance(v, dict)}


def foxglove_topics(path: Path) -> set[str]:
    data = json.loads(path.read_text())
    out: set[str] = set()
    for k, v in _walk(data["configById"]):
        if k in ("imageTopic", "topicName", "topicPath", "topicToRender") and v:
            out.add(str(v))
        elif k == "topics" and isinstance(v, dict):
            out |= set(v)
    return out


def _node_name(topic: str) -> str:
    """A viewer's absolute name in the root namespace -> the table's (relative, except /diagnostics)."""
    return topic if topic == "/diagnostics" else topic.lstrip("/")


@pytest.mark.parametrize(("name", "reader"), [("probench.rviz", rviz_topics),
                                              ("probench.foxglove.json", foxglove_topics)])
def test_viewer_config_names_only_the_node_topics(repo_root: Path, name: str, reader: Any) -> None:
    topics = {_node_name(t) for t in reader(repo_root / "config" / name)}
    assert topics >= SHOWN, f"{name} does not show {sorted(SHOWN - topics)}"
    unknown = topics - set(TOPICS)
    pending = unknown & PENDING_MASKS
    assert unknown == pending, f"{name} names topics the node does not have: {sorted(unknown - pending)}"
    if pending:
        warnings.warn(f"{name}: {sorted(pending)} not in the node's topic table yet (pending: issue 23's "
                      "mask topics)", stacklevel=1)


def test_the_checks_catch_a_wrong_topic(tmp_path: Path) -> None:
    """The readers find every kind of topic field (so a typo cannot slip through)."""
    fox = tmp_path / "f.json"
    fox.write_text(json.dumps({"configById": {"Image!a": {"imageMode": {"imageTopic": "/imgae"}},
                                              "3D!b": {"topics": {"/markerz": {"visible": True}}},
                                              "Publish!c": {"topicName": "/prompt"}}}))
    assert foxglove_topics(fox) == {"/imgae", "/markerz", "/prompt"}
    rv = tmp_path / "r.rviz"
    rv.write_text(yaml.safe_dump({"Visualization Manager": {"Displays": [
        {"Class": "rviz_default_plugins/Image", "Topic": {"Value": "/debug_imag"}}]}}))
    assert rviz_topics(rv) == {"/debug_imag"}
    assert {_node_name(t) for t in rviz_topics(rv)} - set(TOPICS) == {"debug_imag"}


def test_setup_ships_the_viewer_configs(repo_root: Path) -> None:
    text = (repo_root / "setup.py").read_text()
    assert 'glob("config/*.rviz")' in text and 'glob("config/*.json")' in text
