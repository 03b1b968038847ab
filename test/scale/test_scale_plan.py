"""The work plan of a distributed run (pure Python): chunk order, exactly-once records,
retries of a lost worker's images and the end of a run that keeps killing its workers."""

from __future__ import annotations

import pytest

from probench.scale.errors import WorkerLostError
from probench.scale.plan import MAX_CHUNK, Chunk, WorkPlan, default_chunk_size


def _drain(plan: WorkPlan) -> list[Chunk]:
    out = []
    while (chunk := plan.next_chunk()) is not None:
        out.append(chunk)
    return out


def test_chunks_follow_formulation_then_image_order() -> None:
    plan = WorkPlan({"orig": [5, 1, 3, 2, 4], "cat": [2, 1]}, chunk_size=2)
    assert _drain(plan) == [
        Chunk("orig", (1, 2)), Chunk("orig", (3, 4)), Chunk("orig", (5,)), Chunk("cat", (1, 2)),
    ]
    assert plan.remaining == 7 and not plan.done


def test_each_image_is_recorded_once_and_formulations_end_separately() -> None:
    plan = WorkPlan({"orig": [1, 2], "cat": [1]}, chunk_size=4)
    assert plan.record("orig", 1) is True
    assert plan.record("orig", 1) is False  # a copy (a retried chunk's duplicate): not written
    assert plan.record("tmpl", 1) is False  # not part of the plan
    assert not plan.formulation_done("orig")
    assert plan.record("orig", 2) is True
    assert plan.formulation_done("orig") and not plan.done
    assert plan.record("cat", 1) is True and plan.done


def test_a_lost_chunk_goes_back_first_without_what_was_received() -> None:
    plan = WorkPlan({"orig": [1, 2, 3, 4, 5, 6]}, chunk_size=3)
    first = plan.next_chunk()
    assert first == Chunk("orig", (1, 2, 3))
    plan.record("orig", 1)
    plan.give_back(first, received=[1])
    assert plan.retried_images == 2
    assert _drain(plan) == [Chunk("orig", (2, 3)), Chunk("orig", (4, 5, 6))]


def test_images_recorded_meanwhile_are_not_handed_out_again() -> None:
    plan = WorkPlan({"orig": [1, 2, 3]}, chunk_size=3)
    chunk = plan.next_chunk()
    plan.give_back(chunk, received=[])
    plan.record("orig", 2)  # a late result of the lost worker arrived after all
    assert plan.next_chunk() == Chunk("orig", (1, 3))


def test_an_image_that_keeps_killing_workers_ends_the_run() -> None:
    plan = WorkPlan({"orig": [7, 8]}, chunk_size=2, max_attempts=3)
    for _ in range(2):
        plan.give_back(plan.next_chunk(), received=[])
    # a chunk merely queued on the dead worker is not charged
    plan.give_back(plan.next_chunk(), received=[], charge=False)
    with pytest.raises(WorkerLostError, match=r"image 7 \(orig\).*3 times"):
        plan.give_back(plan.next_chunk(), received=[], where="worker 0")


def test_default_chunk_size_balances_and_is_bounded() -> None:
    assert default_chunk_size(0, 2) == 1
    assert default_chunk_size(10, 2) == 2  # 10 images, 2 workers: >= 4 chunks each where possible
    assert default_chunk_size(13000, 8) == MAX_CHUNK
    with pytest.raises(ValueError):
        WorkPlan({"orig": [1]}, chunk_size=0)
