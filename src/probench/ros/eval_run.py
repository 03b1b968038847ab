"""The evaluator's run: replay every group, record as answers arrive, then summarise and score.

Split from :mod:`probench.ros.evaluator_node` (the rclpy shell); ``node`` is that node.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from probench.ros.errors import RosError
from probench.ros.eval_plan import plan_groups, realtime_summary

REALTIME_LOG = "realtime_frames.jsonl"


# -- the run ------------------------------------------------------------------------------
def run_evaluation(node: Any) -> dict:
    """Replay, record, score. Returns the metrics dict (also in RUN/metrics.json)."""
    from probench.bags.reader import ProbenchBag

    bag = ProbenchBag(node.cfg.bag)
    try:
        return _run(node, bag)
    finally:
        bag.close()


def _run(node: Any, bag: Any) -> dict:
    from rclpy.serialization import deserialize_message
    from tqdm import tqdm

    from probench.cache.identity import RunIdentity, open_run
    from probench.cache.run import JsonlLog
    from probench.models.zoo import model_record
    from probench.scoring import score_run

    cfg = node.cfg
    dataset, compressed = bag.dataset, bag.compressed
    stamped = bag.frame_infos()  # images are read per group, just before they are streamed
    infos = [info for _, info in stamped]
    node.make_image_publisher(compressed)

    grounding = node.query_grounding_parameters(timeout=cfg.startup_timeout)
    weights = str(grounding.get("weights") or "") or None
    model = model_record(str(grounding.get("model") or ""), weights=weights)
    settings = {
        "mode": cfg.mode,
        "rate_hz": cfg.rate_hz,
        "budget_ms": cfg.budget_ms,
        "answer_timeout": cfg.answer_timeout,
        "score_threshold": grounding.get("score_threshold"),
        "max_detections": grounding.get("max_detections"),
        "image_reliability": grounding.get("image_reliability"),
        "compressed": compressed,
    }
    bag_path = str(Path(cfg.bag).resolve())
    identity = RunIdentity(
        source="ros", model=model,
        # the dataset came embedded in the bag: no folder path, the bag instead
        dataset={**dataset.summary(), "path": None, "bag": bag_path},
        device=str(grounding.get("device")), precision=str(grounding.get("precision")), settings=settings,
    )
    session = open_run(cfg.out, identity, formulations=cfg.formulations, timing_key="eval_s", extra={
        "ros": {"mode": cfg.mode, "rate_hz": cfg.rate_hz, "bag": bag_path,
                "grounding_node": cfg.grounding_node}})
    run = session.run

    rt_log = JsonlLog(run.path / REALTIME_LOG)
    sink: queue.Queue = queue.Queue()
    node.sink = sink
    writers = {f: run.writer(f) for f in cfg.formulations}
    failure: list[BaseException] = []

    def write_loop() -> None:  # one thread owns the files: fsyncs never delay the replay clock
        while True:
            item = sink.get()
            try:
                if item is None:
                    return
                fp, record, results = item
                if not failure:
                    if record is not None:
                        rt_log.append(record)
                        bar.update(1)
                    writers[fp.formulation].add_image(fp.image_id, results)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                failure.append(exc)
            finally:
                sink.task_done()

    todo = 0
    for f, w in writers.items():
        if w.complete:  # nothing to do; opening the writer created an empty progress log
            w.close()
            if w.log.path.exists() and w.log.path.stat().st_size == 0:
                w.log.path.unlink()
        else:
            todo += sum(len(g.frames) for g in plan_groups(infos, f, w.done_images)[0])
    bar = tqdm(total=todo, desc="eval", unit="frame", disable=None)  # stderr, only on a terminal
    writer_thread = threading.Thread(target=write_loop, name="evaluator-writer", daemon=True)
    writer_thread.start()
    log = node.get_logger()
    first = True
    try:
        for f in cfg.formulations:
            w = writers[f]
            if w.complete:
                log.info(f"{f}: already complete, skipped")
                continue
            groups, empty = plan_groups(infos, f, w.done_images)
            for fp in empty:
                sink.put((fp, None, []))
            n = sum(len(g.frames) for g in groups)
            log.info(f"{f}: {n} frame(s) in {len(groups)} prompt group(s) to replay "
                     f"({len(w.done_images)} already done)")
            for g in groups:
                node.hand_over(g, cfg.startup_timeout if first else max(30.0, cfg.answer_timeout))
                first = False
                if not node.wait_for(lambda: node.image_pub.get_subscription_count() > 0,
                                     cfg.startup_timeout):
                    raise RosError("nobody subscribes to the image topic (remapping mismatch?)")
                # read and decoded ahead by a thread (bounded: a few frames in memory at a
                # time), so that neither a long group nor a zstd chunk upsets the replay clock
                raws = bag.iter_images([stamped[fp.index][0] for fp in g.frames])
                msgs = prefetch(deserialize_message(raw, node.image_type) for raw in raws)
                node.stream(g, msgs)
                if failure:
                    raise failure[0]
            sink.join()
            if failure:
                raise failure[0]
            w.finalize()
    except BaseException as exc:
        session.fail(exc)
        raise
    finally:
        sink.put(None)
        writer_thread.join(timeout=30.0)
        bar.close()
        rt_log.close()
        for w in writers.values():
            w.close()
    if failure:
        raise failure[0]

    # Everything is in the cache: summaries and scores.
    records = JsonlLog(run.path / REALTIME_LOG)
    realtime = realtime_summary(records.records, budget_ms=cfg.budget_ms, rate_hz=cfg.rate_hz,
                                mode=cfg.mode)
    records.close()
    realtime["stray_messages"] = node.stray
    run.write_json("realtime.json", realtime)
    session.finish()
    metrics = score_run(dataset, run.path)
    run.write_json("metrics.json", metrics)
    return metrics


def prefetch(items: Iterator[Any], depth: int = 8) -> Iterator[Any]:
    """``items``, produced by a background thread at most ``depth`` ahead of the consumer;
    an exception in the producer is raised in the consumer."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            q.put(exc)

    thread = threading.Thread(target=produce, name="evaluator-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
