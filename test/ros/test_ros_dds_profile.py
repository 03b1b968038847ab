"""config/fastdds.xml: what it contains, when it is applied, and that Fast DDS takes it.

The delivery it buys is measured by bench/bench_transport.py (not here: a delivery ratio
depends on the machine's load). These tests pin the mechanism: a process started with the
profile has a 16 MB shared-memory segment and exactly the same sockets as one without it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers.grounding_harness import fresh_domain
from helpers.launch_fakes import run_launch
from probench.ros import dds_profile
from probench.ros.dds_profile import PROFILE_VAR, apply_profile, profile_environment, profile_path
from probench.ros.eval_command import child_environment

ROOT = Path(__file__).resolve().parents[2]
NS = {"f": "http://www.eprosima.com"}


def test_profile_is_the_package_file_and_parses() -> None:
    assert profile_path() == ROOT / "config" / "fastdds.xml"
    root = ET.parse(profile_path()).getroot()
    assert root.tag == "{http://www.eprosima.com}dds"


def test_profile_only_adds_a_large_shared_memory_transport() -> None:
    """Nothing that could send a packet elsewhere: no UDP/TCP transport, locators, peers,
    interfaces or multicast; the built-in transports are not switched off (so discovery and
    ROS_AUTOMATIC_DISCOVERY_RANGE work as without the file)."""
    root = ET.parse(profile_path()).getroot()
    descriptors = root.findall(".//f:transport_descriptor", NS)
    assert [d.findtext("f:type", namespaces=NS) for d in descriptors] == ["SHM"]
    segment = int(descriptors[0].findtext("f:segment_size", namespaces=NS))
    assert segment >= 4 * 1280 * 720 * 3  # several 720p rgb8 frames, so 640x480 many times over
    tags = {el.tag.split("}")[1] for el in root.iter()}
    assert tags == {"dds", "profiles", "transport_descriptors", "transport_descriptor", "transport_id",
                    "type", "segment_size", "participant", "rtps", "userTransports"}
    (participant,) = root.findall(".//f:participant", NS)
    assert participant.get("is_default_profile") == "true"  # what rmw_fastrtps takes its QoS from
    used = [t.text for t in participant.findall(".//f:userTransports/f:transport_id", NS)]
    assert used == [descriptors[0].findtext("f:transport_id", namespaces=NS)]


@pytest.mark.parametrize("env", [
    {"FASTDDS_DEFAULT_PROFILES_FILE": "/etc/mine.xml"},
    {"FASTRTPS_DEFAULT_PROFILES_FILE": "/etc/mine.xml"},  # Fast DDS 2.x's name, still honoured
    {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"},
])
def test_a_choice_of_the_user_is_never_overridden(env: dict[str, str], tmp_path: Path) -> None:
    assert profile_environment(env, cwd=tmp_path) == {}
    mutable = dict(env)
    assert apply_profile(mutable) is None and mutable == env


def test_applied_when_nothing_is_chosen(tmp_path: Path) -> None:
    assert profile_environment({}, cwd=tmp_path) == {PROFILE_VAR: str(profile_path())}
    assert profile_environment({"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}, cwd=tmp_path) == {
        PROFILE_VAR: str(profile_path())}
    assert profile_environment({PROFILE_VAR: ""}, cwd=tmp_path) == {PROFILE_VAR: str(profile_path())}
    # Fast DDS reads DEFAULT_FASTDDS_PROFILES.xml from the working folder by itself: the user's choice
    (tmp_path / "DEFAULT_FASTDDS_PROFILES.xml").write_text("<dds/>")
    assert profile_environment({}, cwd=tmp_path) == {}


def test_missing_file_applies_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(dds_profile, "profile_path", lambda: tmp_path / "absent.xml")
    assert profile_environment({}, cwd=tmp_path) == {}


def test_probench_eval_gives_its_nodes_the_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(PROFILE_VAR, raising=False)
    monkeypatch.delenv("FASTRTPS_DEFAULT_PROFILES_FILE", raising=False)
    assert child_environment(7)[PROFILE_VAR] == str(profile_path())
    monkeypatch.setenv(PROFILE_VAR, "/etc/mine.xml")
    assert child_environment(7)[PROFILE_VAR] == "/etc/mine.xml"


@pytest.mark.parametrize("launch_file", ["grounding.launch.py", "eval.launch.py"])
def test_launch_files_set_the_profile_unless_chosen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    launch_file: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FASTRTPS_DEFAULT_PROFILES_FILE", raising=False)
    args = {"bag": "b", "out": "o"} if launch_file == "eval.launch.py" else {}
    for chosen, expected in ((None, str(profile_path())), ("/etc/mine.xml", None)):
        if chosen is None:
            monkeypatch.delenv(PROFILE_VAR, raising=False)
        else:
            monkeypatch.setenv(PROFILE_VAR, chosen)
        _, actions, classes = run_launch(monkeypatch, ROOT / "launch" / launch_file, **args)
        env = [a.args for a in actions if isinstance(a, classes["SetEnvironmentVariable"])]
        assert env == ([(PROFILE_VAR, expected)] if expected else [])
        if expected:  # before any node, so every node of the launch gets it
            assert isinstance(actions[0], classes["SetEnvironmentVariable"])


_PROBE = r"""
import json, os, time, rclpy
rclpy.init()
node = rclpy.create_node("profile_probe")
time.sleep(0.5)
links = []
for fd in os.listdir("/proc/self/fd"):
    try:
        links.append(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass
inodes = {link[8:-1] for link in links if link.startswith("socket:[")}
sockets = []
for table in ("udp", "udp6", "tcp", "tcp6"):
    for line in open(f"/proc/net/{table}").read().splitlines()[1:]:
        f = line.split()
        if f[9] in inodes:
            sockets.append([table, f[1].split(":")[0]])
segments = set()
for line in open("/proc/self/maps"):
    name = line.split()[-1]
    if name.startswith("/dev/shm/fastdds_") and "port" not in name:
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        segments.add(hi - lo)
print(json.dumps({"sockets": sorted(sockets), "segments": sorted(segments)}))
node.destroy_node()
rclpy.try_shutdown()
"""


def _probe(ros_env: dict[str, str], tmp_path: Path, profile: bool) -> tuple[dict, str]:
    env = {k: v for k, v in ros_env.items() if k not in ("FASTDDS_DEFAULT_PROFILES_FILE",
                                                         "FASTRTPS_DEFAULT_PROFILES_FILE")}
    env["ROS_DOMAIN_ID"] = str(fresh_domain())
    if profile:
        env[PROFILE_VAR] = str(profile_path())
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.mark.ros
@pytest.mark.usefixtures("requires_vision_msgs")
def test_fast_dds_takes_the_profile_and_opens_no_other_socket(ros_env: dict[str, str],
                                                               tmp_path: Path) -> None:
    with_profile, err = _probe(ros_env, tmp_path, profile=True)
    without, _ = _probe(ros_env, tmp_path, profile=False)
    assert "error" not in err.lower(), err  # Fast DDS reports XML problems on stderr
    assert max(with_profile["segments"]) >= 16 * 1024 * 1024  # the profile's segment
    assert max(without["segments"]) < 1024 * 1024  # Fast DDS's default: 512 KB
    # the same sockets on the same addresses: the profile adds no network path
    assert with_profile["sockets"] == without["sockets"]
