"""BagSource: any rosbag2, the camera topic chosen by the rules, bare storage files; and
the output side: StagedBagWriter never replaces what is not a bag, vision_msgs registered."""

from __future__ import annotations

from pathlib import Path

import pytest

from probench.bags.errors import BagError, BagUsageError
from probench.bags.source import BagSource
from probench.bags.staged import StagedBagWriter, check_new_bag


def _bag(path: Path, topics: dict[str, str], storage: str = "mcap") -> Path:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as w:
        for i, (topic, msgtype) in enumerate(topics.items()):
            conn = w.add_connection(topic, msgtype, typestore=ts)
            w.write(conn, 100 + i, b"\x00\x01\x00\x00")  # only the topics matter here
    return path


IMG, JPG, STR = "sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage", "std_msgs/msg/String"


def test_camera_topic_rules(tmp_path: Path) -> None:
    with BagSource(_bag(tmp_path / "twin", {"/cam/image": IMG, "/cam/image/compressed": JPG})) as src:
        assert src.image_topic().name == "/cam/image"  # one camera: the raw twin
        assert src.image_topic("/cam/image/compressed").msgtype == JPG
        with pytest.raises(BagUsageError, match=r"no such topic.*image topics: /cam/image"):
            src.image_topic("/cam")
    with BagSource(_bag(tmp_path / "one", {"/front/compressed": JPG, "/chat": STR})) as src:
        assert src.image_topic().name == "/front/compressed"
        with pytest.raises(BagUsageError, match="is std_msgs/msg/String, not an image"):
            src.image_topic("/chat")
    two = _bag(tmp_path / "two", {"/a/image": IMG, "/b/image": IMG})
    with BagSource(two) as src, pytest.raises(BagUsageError, match="2 image topics"):
        src.image_topic()
    none = _bag(tmp_path / "none", {"/chat": STR})
    with BagSource(none) as src, pytest.raises(BagError, match=r"no image topic.*topics: /chat"):
        src.image_topic()


def test_prompt_topic_rules(tmp_path: Path) -> None:
    with BagSource(_bag(tmp_path / "p", {"/robot/prompt": STR, "/chat": STR})) as src:
        assert src.prompt_topic(None).name == "/robot/prompt"  # auto: the node's topic name
        assert src.prompt_topic("/chat").name == "/chat"
        assert src.prompt_topic("none") is None
    both = _bag(tmp_path / "pp", {"/a/prompt": STR, "/b/prompt": STR})
    with BagSource(both) as src, pytest.raises(BagUsageError, match="2 prompt topics"):
        src.prompt_topic(None)


def test_bare_storage_files_and_sqlite(tmp_path: Path) -> None:
    bag = _bag(tmp_path / "b", {"/cam/image": IMG})
    with BagSource(next(bag.glob("*.mcap"))) as src:  # Foxglove users often keep just the .mcap
        assert src.storage == "mcap" and src.first("/cam/image") is not None
    db = _bag(tmp_path / "s", {"/cam/image": IMG}, storage="sqlite3")
    with BagSource(db) as src:
        assert src.storage == "sqlite3" and [t for _, t, _ in src.messages(["/cam/image"])] == [100]


def test_staged_writer_never_replaces_what_is_not_a_bag(tmp_path: Path) -> None:
    from probench.bags.typestore import typestore

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("x")
    with pytest.raises(BagUsageError, match="not a rosbag2 folder"):
        check_new_bag(mine, overwrite=True)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError), StagedBagWriter(out) as w:
        w.add_topic("/chat", STR, typestore())
        raise RuntimeError("failed half way")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["mine"]
    for _ in range(2):  # the second time replaces the first bag
        with StagedBagWriter(out, overwrite=True) as w:
            w.add_topic("/chat", STR, typestore())
    assert sorted(p.suffix for p in out.iterdir()) == [".mcap", ".yaml"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "out"]


def test_vision_typestore_needs_the_definitions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import probench.bags.typestore as store

    assert "vision_msgs/msg/Detection2DArray" in store.vision_typestore().types
    store.vision_typestore.cache_clear()
    monkeypatch.setattr(store, "vision_msgs_folders", lambda: [tmp_path])
    try:
        with pytest.raises(BagError, match="vision_msgs message definitions not found"):
            store.vision_typestore()
    finally:
        store.vision_typestore.cache_clear()
