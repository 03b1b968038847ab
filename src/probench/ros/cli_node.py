"""``probench node``: the terminal counterpart of ``probench console``, with no ros2cli.

    probench node status                         # lifecycle, model, prompts, /diagnostics
    probench node status --watch                 # follow them (Ctrl-C stops)
    probench node prompt "a red backpack; a door handle"   # waits for the node's ack
    probench node prompt "a mug" --watch 10      # then prints detections for 10 s
    probench node deactivate                     # configure | activate | deactivate | cleanup
    probench node param list                     # every parameter, its value and description
    probench node param set prompt_policy categorical   # the node's reason when it refuses
    probench node target 7                       # track 7 is the target; --clear: the best again
    probench node watch                          # every output: track ids, 3D, masks, the target
    probench node status --node /robot1/grounding_node

It talks to the grounding node through the console's ROS bridge
(:mod:`probench.ros.console_bridge`): the same topics and services, the same ROS
environment (``ROS_DOMAIN_ID``, ``ROS_AUTOMATIC_DISCOVERY_RANGE``). Exit 0 when done, 1 when
no node answered or it refused (one line on stderr), 2 on usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from probench.console.bridge import split_node_name
from probench.console.errors import BridgeError, ConsoleUsageError
from probench.errors import CheckFailed
from probench.limits import INT64_MAX, MAX_TIMEOUT_S, IntRange, check_flag
from probench.vocabulary import escape_for_log

T = TypeVar("T")

if TYPE_CHECKING:
    from probench.console.bridge import NodeView
    from probench.console.params import ParamInfo
    from probench.ros.console_bridge import RosConsoleBridge

LIFECYCLE_ACTIONS = ("configure", "activate", "deactivate", "cleanup")
_POLL_S = 0.05
_UNKNOWN_AFTER_S = 1.0  # `node target`: this long of the node's frames without the track: not in view
_REASON_WAIT_S = 3.0  # a refused configure's reason: published with the refusal, waited for this long
# Diagnostics values shown first (the rest follow in the node's order).
_HEADLINE = ("state", "model", "device", "precision", "rate_hz", "latency_p50_ms", "latency_p95_ms",
             "frames_received", "frames_processed", "frames_skipped", "errors", "prompts_rejected")


class NodeCliError(CheckFailed):
    """The node is not there, did not answer in time, or refused."""


class ConfigureRefused(NodeCliError):
    """The node refused a configure, with its reason."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--node", default="/grounding_node",
                        help="the grounding node (default /grounding_node; its topics are found in its "
                             "namespace)")
    common.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="seconds to wait for the node and its answer (default: 10; 60 for "
                             "configure, which loads the model)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    status = actions.add_parser("status", parents=[common],
                                help="lifecycle state, model, active prompts, /diagnostics key/values, "
                                     "transport loss")
    status.add_argument("--watch", action="store_true", help="print again at every /diagnostics message "
                                                             "until Ctrl-C")
    status.add_argument("--json", action="store_true", help="one JSON object per report instead of text")
    prompt = actions.add_parser("prompt", parents=[common],
                                help="send a prompt set (';'-separated) and wait for the node's ack")
    prompt.add_argument("text", metavar="TEXT", help="one or more target descriptions, ';'-separated")
    prompt.add_argument("--watch", type=float, default=0.0, metavar="S",
                        help="then print the detections for S seconds")
    for action in LIFECYCLE_ACTIONS:
        actions.add_parser(action, parents=[common], help=f"lifecycle transition: {action}")
    param = actions.add_parser("param", help="list, get or set the node's parameters (its "
                                             "ListParameters / GetParameters / SetParameters services)")
    param_actions = param.add_subparsers(dest="param_action", metavar="list|get|set", required=True)
    listing = param_actions.add_parser(
        "list", parents=[common], help="every parameter: type, value, when a change applies, description")
    listing.add_argument("--json", action="store_true", help="one JSON list instead of text")
    get = param_actions.add_parser("get", parents=[common], help="one parameter's value and description")
    get.add_argument("name", metavar="NAME")
    get.add_argument("--json", action="store_true", help="one JSON object instead of text")
    put = param_actions.add_parser("set", parents=[common],
                                   help="set one parameter; a refused value exits 1 with the node's reason")
    put.add_argument("name", metavar="NAME")
    put.add_argument("value", metavar="VALUE",
                     help="read as the parameter's type: true/false, a number, text, or a YAML list of "
                          "strings (\"['a mug', 'a kettle']\")")
    put.add_argument("--reconfigure", action="store_true",
                     help="for a configure-time parameter (score_threshold, ...): then run cleanup + "
                          "configure (+ activate when it was active), so the value is in force (reloads "
                          "the model)")
    target = actions.add_parser("target", parents=[common],
                                help="make a track the node's target (target_pose follows it), or --clear")
    target.add_argument("track_id", metavar="TRACK_ID", nargs="?", type=IntRange(0, INT64_MAX),
                        help="a track id, as in Detection2D.id (the node's `tracking` parameter on)")
    target.add_argument("--clear", action="store_true", help="back to the best detection of the first prompt")
    watching = actions.add_parser("watch", parents=[common],
                                  help="print the node's outputs as they come: detections with track ids, "
                                       "3D positions, mask summaries, the target (each with its QoS)")
    watching.add_argument("--only", default=None, metavar="KINDS",
                          help="comma-separated subset of detections, 3d, masks, target (default: all)")
    watching.add_argument("--for", dest="seconds", type=float, default=None, metavar="S",
                          help="stop after S seconds (default: until Ctrl-C)")
    watching.add_argument("--json", action="store_true", help="one JSON object per message instead of text")


def run(args: argparse.Namespace) -> int:
    split_node_name(args.node)  # a usage error before anything starts
    reload = args.action == "configure" or (args.action == "param" and getattr(args, "reconfigure", False))
    timeout = args.timeout if args.timeout is not None else (60.0 if reload else 10.0)
    check_flag("--timeout", timeout, low=0.0, low_open=True, high=MAX_TIMEOUT_S)  # (nan, inf refused)
    prompts: tuple[str, ...] = ()
    if args.action == "prompt":
        from probench.realtime.node_spec import prompts_from_message

        prompts = prompts_from_message(args.text)  # checked as the node checks it
        check_flag("--watch", args.watch, low=0.0, high=MAX_TIMEOUT_S)

    if args.action == "target" and (args.track_id is None) == (not args.clear):
        raise ConsoleUsageError("give a TRACK_ID or --clear (one of them)")
    if args.action == "watch":
        return _watch(args, timeout)

    from probench.ros.console_bridge import LIFECYCLE_TRANSITIONS, RosConsoleBridge
    from probench.ros.dds_profile import apply_profile

    apply_profile()  # before the bridge's participant exists, as the console does
    bridge = RosConsoleBridge(args.node, transitions=LIFECYCLE_TRANSITIONS)
    try:
        if args.action == "status":
            return _status(bridge, timeout, watch=args.watch, as_json=args.json)
        if args.action == "prompt":
            return _prompt(bridge, prompts, timeout, args.watch)
        if args.action == "param":
            return _param(bridge, args, timeout)
        if args.action == "target":
            return _target(bridge, None if args.clear else args.track_id, timeout)
        return _transition(bridge, args.action, timeout)
    finally:
        bridge.close()


# -- waiting ---------------------------------------------------------------------------------
def _wait(what: Callable[[], T], timeout: float) -> T:
    """``what()`` once it is truthy, or its last value at ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got or time.monotonic() >= deadline:
            return got
        time.sleep(_POLL_S)


def _present(bridge: RosConsoleBridge, timeout: float) -> NodeView:
    """The node's view once its lifecycle services are on the graph and its state is known
    (a node busy in a transition, loading a model, answers get_state only afterwards: then
    the state stays "unknown" and the caller goes on)."""
    deadline = time.monotonic() + timeout
    if not _wait(lambda: bridge.view().present, timeout):
        raise NodeCliError(_absent(bridge))
    _wait(lambda: bridge.view().lifecycle != "unknown", max(0.0, deadline - time.monotonic()))
    return bridge.view()


def _absent(bridge: RosConsoleBridge) -> str:
    import os

    domain = os.environ.get("ROS_DOMAIN_ID", "0")
    return (f"no grounding node {bridge.names['node']} answered (is it running, with the same "
            f"ROS_DOMAIN_ID={domain} and ROS_AUTOMATIC_DISCOVERY_RANGE?)")


# -- status ----------------------------------------------------------------------------------
def status_record(view: NodeView) -> dict[str, Any]:
    """What ``status`` prints, as data (``--json``)."""
    diag = view.diagnostics
    return {
        "node": view.node, "present": view.present, "lifecycle": view.lifecycle,
        "prompts": list(view.prompts),
        "diagnostics": None if diag is None else {
            "level": diag.level, "message": diag.message, "age_s": round(diag.age_s, 2),
            "values": dict(diag.values)},
    }


def status_text(view: NodeView) -> str:
    """The human-readable report of one view. Every text that came over the graph (prompts,
    diagnostics values, the node's message) is escaped (:func:`probench.vocabulary.escape_for_log`):
    a prompt holding ESC sequences or newlines cannot drive the operator's terminal."""
    return "\n".join(escape_for_log(line, limit=4096) for line in _status_lines(view))


def _status_lines(view: NodeView) -> list[str]:
    state = view.lifecycle
    if state == "unknown" and view.present:
        state = "unknown (no answer to get_state: busy in a transition, loading a model?)"
    lines = [f"node         {view.node}", f"lifecycle    {state}"]
    diag = view.diagnostics
    values = dict(diag.values) if diag else {}
    if values.get("model"):
        lines.append(f"model        {values['model']} on {values.get('device', '?')} "
                     f"({values.get('precision', '?')})")
    lines.append("prompts      " + (" ; ".join(view.prompts) if view.prompts else "(none)"))
    if values.get("target", "-") != "-":  # how the node chose its target (tracking or depth on)
        lines.append(f"target       {values['target']}")
    if "transport_loss" in values:
        share = float(values["transport_loss"])
        lines.append(f"transport    {share:.1%} of camera frames lost in the last 10 s "
                     f"({values.get('transport_lost', '?')} lost, {values.get('transport_received', '?')} "
                     f"received)" + (f": {values['transport_hint']}" if values.get("transport_hint") else ""))
    if diag is None:
        lines.append("diagnostics  (none received yet)")
        return lines
    lines.append(f"diagnostics  {diag.level}: {diag.message} ({diag.age_s:.1f} s ago)")
    keys = [k for k in _HEADLINE if k in values] + [k for k in values if k not in _HEADLINE]
    width = max(len(k) for k in keys) if keys else 0
    lines += [f"  {escape_for_log(k).ljust(width)}  {escape_for_log(str(values[k]), limit=1024)}"
              for k in keys]
    return lines


def _status(bridge: RosConsoleBridge, timeout: float, *, watch: bool, as_json: bool) -> int:
    _present(bridge, timeout)
    view = _wait(lambda: (v := bridge.view()).diagnostics is not None and v, timeout) or bridge.view()
    shown: float | None = None  # when the diagnostics last printed arrived (monotonic)
    try:
        while True:
            arrived = None if view.diagnostics is None else time.monotonic() - view.diagnostics.age_s
            if shown is None or (arrived is not None and arrived > shown + 0.05):
                out = json.dumps(status_record(view)) if as_json else status_text(view)
                print(out + ("" if as_json or not watch else "\n"), flush=True)
                shown = -float("inf") if arrived is None else arrived
            if not watch:
                return 0
            time.sleep(0.1)
            view = bridge.view()
            if not view.present:
                raise NodeCliError(f"{view.node} left the graph")
    except KeyboardInterrupt:  # how --watch ends
        return 0


# -- prompt ----------------------------------------------------------------------------------
def _prompt(bridge: RosConsoleBridge, prompts: tuple[str, ...], timeout: float, watch_s: float) -> int:
    deadline = time.monotonic() + timeout
    if not _wait(bridge.node_listens, timeout):
        raise NodeCliError(f"no grounding node subscribes {bridge.names['prompt']} ({_absent(bridge)})")
    _wait(lambda: bridge.view().prompts_age_s is not None, 0.3)  # the latched ack of the old set first
    sent = time.monotonic()
    try:
        bridge.send_prompts(prompts)
    except BridgeError as exc:
        raise NodeCliError(str(exc)) from exc

    from probench.prompting.derive import derive

    # the node acknowledges the operator's parts (an explicit `ORIG => CAT` lists ORIG): the class ids
    operator = tuple(derive(p).orig for p in prompts)

    def acked() -> bool:  # a LabelInfo with exactly this set, received after it was sent
        v = bridge.view()
        age = v.prompts_age_s
        return v.prompts == operator and age is not None and time.monotonic() - age > sent

    if not _wait(acked, max(0.0, deadline - time.monotonic())):
        raise NodeCliError(f"no acknowledgement from {bridge.names['node']} within {timeout:g} s (prompt "
                           "refused, or the node is not active? `probench node status` shows "
                           "prompts_rejected and the state)")
    print("active prompts: " + " ; ".join(map(escape_for_log, operator)), flush=True)
    if watch_s > 0:
        _print_detections(bridge, watch_s)
    return 0


def _print_detections(bridge: RosConsoleBridge, seconds: float) -> None:
    end = time.monotonic() + seconds
    last = None
    while time.monotonic() < end:
        view = bridge.view()
        if view.detections_stamp is not None and view.detections_stamp != last:
            last = view.detections_stamp
            items = ", ".join(f"{escape_for_log(d.label)} {d.score:.2f} @({(d.box[0] + d.box[2]) / 2:.0f},"
                              f"{(d.box[1] + d.box[3]) / 2:.0f})" for d in view.detections[:5])
            print(f"{last:.9f}: {len(view.detections)} detections {items}".rstrip(), flush=True)
        time.sleep(_POLL_S)


# -- lifecycle -------------------------------------------------------------------------------
def _transition(bridge: RosConsoleBridge, action: str, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    before = _present(bridge, timeout).lifecycle
    try:
        state = _change_state(bridge, action, max(1.0, deadline - time.monotonic()))
    except ConfigureRefused as exc:
        raise NodeCliError(f"{exc}; its configure-time parameters are back to the last configuration that "
                           "worked (`probench node configure` loads it again)") from exc
    print(f"{bridge.names['node']}: {before} -> {state}", file=sys.stdout, flush=True)
    return 0


def _failures(bridge: RosConsoleBridge) -> int | None:
    """The node's ``configure_failures`` on its newest /diagnostics (None: none seen, or a node
    that does not report it)."""
    diag = bridge.view().diagnostics
    try:
        return None if diag is None else int(diag.values["configure_failures"])
    except (KeyError, ValueError):
        return None


def _change_state(bridge: RosConsoleBridge, action: str, timeout: float) -> str:
    """A transition; a refused configure is a :class:`ConfigureRefused` with the node's reason:
    its /diagnostics' ``configure_error``, published the moment it failed (told from an older
    failure by ``configure_failures``)."""
    before, asked = _failures(bridge), time.monotonic()
    try:
        return bridge.change_state(action, timeout)
    except BridgeError as exc:
        if action != "configure" or "refused" not in str(exc):
            raise NodeCliError(str(exc)) from exc

        def reason() -> str:
            diag = bridge.view().diagnostics
            if diag is None or time.monotonic() - diag.age_s < asked:
                return ""
            count = _failures(bridge)
            return diag.values.get("configure_error", "") if before is None or (count or 0) > before else ""

        why = _wait(reason, _REASON_WAIT_S) or "(its reason did not come on /diagnostics: see its log)"
        node = bridge.names["node"]
        raise ConfigureRefused(f"{node} refused configure: {escape_for_log(why, 1024)}") from exc


# -- param -----------------------------------------------------------------------------------
def param_lines(params: list[ParamInfo]) -> list[str]:
    """``param list``'s text: one line per parameter (name, type, value, applies), its
    description indented below."""
    width = max((len(p.name) for p in params), default=0)
    lines = []
    for p in params:
        applies = p.applies or ("read-only" if p.read_only else "")
        head = f"{p.name.ljust(width)}  {p.type:<12} {p.value_text()}"
        lines.append(head + (f"  ({applies})" if applies else ""))
        if p.description:
            lines.append(f"{'':{width}}    {p.description}")
    return lines


def _param(bridge: RosConsoleBridge, args: argparse.Namespace, timeout: float) -> int:
    from probench.console.params import applies_text, format_value, parse_value

    deadline = time.monotonic() + timeout
    try:
        if args.param_action == "list":
            params = bridge.parameters(None, timeout)
            print(json.dumps([p.as_dict() for p in params]) if args.json else "\n".join(param_lines(params)),
                  flush=True)
            return 0
        (info,) = bridge.parameters([args.name], timeout)
        if args.param_action == "get":
            print(json.dumps(info.as_dict()) if args.json else "\n".join(param_lines([info])), flush=True)
            return 0
        value = parse_value(info.type, args.value, args.name)
        bridge.set_parameter(args.name, value, info.type, max(1.0, deadline - time.monotonic()))
        (now,) = bridge.parameters([args.name], max(1.0, deadline - time.monotonic()))
    except BridgeError as exc:
        raise NodeCliError(str(exc)) from exc
    said = applies_text(now.applies)
    if args.reconfigure and now.applies == "configure":
        print(f"{now.name} = {format_value(now.value)}; reconfiguring {bridge.names['node']} so that it is "
              "in force", flush=True)
        _reconfigure(bridge, max(1.0, deadline - time.monotonic()))
        said = "in force now (the node was reconfigured)"
    print(f"{now.name} = {format_value(now.value)}" + (f": {said}" if said else ""), flush=True)
    return 0


def _reconfigure(bridge: RosConsoleBridge, timeout: float) -> None:
    """cleanup + configure (deactivate first and activate after when the node was active)."""
    deadline = time.monotonic() + timeout
    was = _present(bridge, timeout).lifecycle
    steps = {"active": ("deactivate", "cleanup", "configure", "activate"),
             "inactive": ("cleanup", "configure")}.get(was)
    if steps is None:
        raise NodeCliError(f"{bridge.names['node']} is {was}: nothing to reconfigure (the value is read at "
                           "its next configure)")
    for step in steps:
        try:
            state = _change_state(bridge, step, max(1.0, deadline - time.monotonic()))
        except ConfigureRefused as exc:
            back = _back_to_good(bridge, was, max(1.0, deadline - time.monotonic()))
            raise NodeCliError(f"{exc}; {back}") from exc
        print(f"{bridge.names['node']}: {step} -> {state}", flush=True)


def _back_to_good(bridge: RosConsoleBridge, was: str, timeout: float) -> str:
    """After a refused reconfigure the node's parameters are the last configuration that
    worked: configure (and activate when it was active) again, so it runs as before."""
    deadline = time.monotonic() + timeout
    steps = ("configure", "activate") if was == "active" else ("configure",)
    try:
        for step in steps:
            state = _change_state(bridge, step, max(1.0, deadline - time.monotonic()))
            print(f"{bridge.names['node']}: {step} -> {state}", flush=True)
    except NodeCliError as exc:
        return f"and the last configuration that worked did not come back either: {exc}"
    return f"the node is {state} again with the last configuration that worked"


# -- watch -----------------------------------------------------------------------------------
def _watch(args: argparse.Namespace, timeout: float) -> int:
    """Every chosen output of the node, one line (or JSON object) per message, until ``--for``
    seconds have passed or Ctrl-C; the node must show up within ``--timeout``."""
    from probench.console.watch import parse_kinds, record_line, watched_topics

    check_flag("--for", args.seconds, low=0.0, low_open=True, high=MAX_TIMEOUT_S)
    try:
        kinds = parse_kinds(args.only)
    except ValueError as exc:
        raise ConsoleUsageError(str(exc)) from None
    from probench.ros.dds_profile import apply_profile
    from probench.ros.node_watch import NodeWatch

    def show(rec: dict[str, Any]) -> None:
        print(json.dumps(rec) if args.json else record_line(rec), flush=True)

    apply_profile()
    watcher = NodeWatch(args.node, watched_topics(kinds), show)
    if not args.json:
        print(f"watching {', '.join(watcher.topics.values())} (Ctrl-C stops)", flush=True)
    try:
        deadline = time.monotonic() + timeout
        while not watcher.present():
            if time.monotonic() > deadline:
                domain = os.environ.get("ROS_DOMAIN_ID", "0")
                raise NodeCliError(f"no grounding node {args.node} within {timeout:g} s (is it running, with "
                                   f"the same ROS_DOMAIN_ID={domain} and ROS_AUTOMATIC_DISCOVERY_RANGE?)")
            watcher.spin(0.1)
        watcher.spin(args.seconds)
    except KeyboardInterrupt:  # how an open-ended watch ends
        pass
    finally:
        watcher.close()
    return 0


# -- target ----------------------------------------------------------------------------------
def _target(bridge: RosConsoleBridge, track_id: int | None, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    if not _wait(bridge.target_listens, timeout):
        topic = bridge.names["target_select"]
        raise NodeCliError(f"no grounding node subscribes {topic} ({_absent(bridge)})")
    _wait(lambda: bridge.view().target is not None, 0.3)  # the latched target of before, if any
    try:
        bridge.select_target(track_id)
    except BridgeError as exc:
        raise NodeCliError(str(exc)) from exc
    if track_id is None:
        print("target cleared: the best detection of the first prompt again", flush=True)
        return 0
    wanted = str(track_id)
    in_view = _TracksInView(bridge)

    def answered() -> tuple[str, str] | str | None:
        t = bridge.view().target
        if t is not None and t[0] == wanted:
            return t
        in_view.update()
        return in_view.without(wanted)

    got = _wait(answered, max(0.0, deadline - time.monotonic()))
    if isinstance(got, str):  # the node's detections went on without the track: no waiting it out
        raise NodeCliError(f"track {track_id} is not in view of {bridge.names['node']}: {got}")
    if not got:
        raise NodeCliError(f"no `target` naming track {track_id} from {bridge.names['node']} within "
                           f"{timeout:g} s (is the track in view, with the node's tracking on? "
                           "`probench node status` shows the target state)")
    print(f"target: track {got[0]}" + (f" ({got[1]})" if got[1] else ""), flush=True)
    return 0


class _TracksInView:
    """The track ids of the node's detections since the selection was sent: once they span
    :data:`_UNKNOWN_AFTER_S` (frames newer than the selection) without the wanted track, it
    is not in view and the caller stops waiting (the node would give way after target_timeout)."""

    def __init__(self, bridge: RosConsoleBridge) -> None:
        self.bridge, self.since = bridge, time.monotonic()
        self.ids: set[str] = set()
        self.first: float | None = None  # arrival of the first frame after the selection
        self._last: float | None = bridge.view().detections_stamp

    def update(self) -> None:
        view = self.bridge.view()
        if view.detections_stamp is not None and view.detections_stamp != self._last:
            self._last = view.detections_stamp
            self.first = time.monotonic() if self.first is None else self.first
            self.ids |= {d.track_id for d in view.detections if d.track_id}

    def without(self, wanted: str) -> str:
        """Why ``wanted`` is not in view, once that is known; "" until then."""
        if self.first is None or wanted in self.ids or time.monotonic() - self.first < _UNKNOWN_AFTER_S:
            return ""
        if not self.ids:
            return (f"its detections of the last {_UNKNOWN_AFTER_S:g} s carry no track ids (is its "
                    "`tracking` parameter on?)")
        shown = ", ".join(sorted(self.ids, key=lambda t: (len(t), t))[:20])
        return (f"its detections of the last {_UNKNOWN_AFTER_S:g} s have tracks {shown} "
                "(`probench node watch` shows them)")
