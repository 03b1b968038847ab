"""One local Ray cluster per test module (2 CPUs, loopback only, no dashboard, no usage
statistics), shut down at the module's end; any process it started that outlives the
shutdown is killed by pid (only our own descendants)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from probench.scale.cluster import Cluster, ray_cluster


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Cluster]:
    import psutil

    me = psutil.Process()
    started: list[psutil.Process] = []
    with ray_cluster(None, num_cpus=2) as cluster:
        try:
            yield cluster
        finally:
            started = me.children(recursive=True)
    _, alive = psutil.wait_procs(started, timeout=30)
    for proc in alive:
        proc.kill()
    psutil.wait_procs(alive, timeout=10)
