"""The live node refuses a compressed frame over ``max_image_pixels`` from its header: a
decompression bomb is an image error in /diagnostics, not an out-of-memory kill, and the
next frame is answered."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, fresh_domain, image
from helpers.image_bomb import png_bomb

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_bomb_refused_by_the_live_node(tmp_path, ros_env, requires_vision_msgs) -> None:
    from sensor_msgs.msg import CompressedImage

    domain = fresh_domain()
    node = NodeProcess(ros_env, domain, tmp_path / "node.log",
                       {"model": "test-instant", "prompts": ["x"], "image_reliability": "reliable"})
    peer = RosPeer(domain)
    try:
        peer.wait_ready(node)
        peer.send_image(image(), peer.header(1))
        assert peer.answer(1) is not None
        peak_before = _peak_rss_kb(node.pid)
        bomb = CompressedImage(header=peer.header(2), format="png")
        bomb.data = np.frombuffer(png_bomb(), np.uint8).tobytes()
        peer.pub_compressed.publish(bomb)

        def refused() -> str | None:
            for msg in peer.diags:
                for st in msg.status:
                    values = {kv.key: kv.value for kv in st.values}
                    if "over the budget of 50 MP" in st.message and values.get("errors") == "1":
                        return str(st.message)
            return None

        message = peer.spin_until(refused, 15)
        assert message and "30000x30000" in message, [s.message for m in peer.diags for s in m.status]
        assert _peak_rss_kb(node.pid) - peak_before < 200 * 1024
        peer.send_image(image(), peer.header(3))
        assert peer.answer(3) is not None  # the node carries on
        assert "Traceback" not in node.output()
    finally:
        peer.close()
        assert node.stop() == 0
