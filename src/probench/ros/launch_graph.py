"""The launch files' link to the graph tables: declarative ``Node`` actions whose parameters
and remappings are launch substitutions read through the same functions ``probench eval``
uses (:func:`probench.ros.graph.eval_graph_from_arguments`,
:func:`probench.realtime.node_spec.grounding_from_arguments`).

launch has no substitution for "an argument left empty leaves the params file's value", nor
for parsing a ``;``-separated prompt list or a number: :class:`FromGraph` does it at launch
time, through the table, never by evaluating text. The overrides become a params file, as
launch_ros itself writes one for a dict of parameters. Imported by the launch files only
(it imports ``launch``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import yaml
from launch.substitution import Substitution

from probench.realtime.node_spec import LAUNCH_ARGUMENTS, grounding_from_arguments, grounding_node_description
from probench.ros.graph import EVAL_ARGUMENTS, eval_graph, eval_graph_from_arguments

if TYPE_CHECKING:  # a name for the checker only: the launch files' tests stand in for `launch`
    from launch.launch_context import LaunchContext

Build = Callable[[Mapping[str, str]], list[dict[str, Any]]]

# graph name -> (the launch arguments it reads, the node descriptions from their values)
GRAPHS: dict[str, tuple[tuple[str, ...], Build]] = {
    "grounding": (tuple(LAUNCH_ARGUMENTS), lambda values: [grounding_from_arguments(values)]),
    "eval": (tuple(EVAL_ARGUMENTS), eval_graph_from_arguments),
}
REMAPPED = ("image", "image/compressed")  # the inputs a node of either graph may have remapped
FIELDS = ("params_file", "overrides", "remap")


def static_nodes(graph: str) -> list[dict[str, Any]]:
    """What of each node does not depend on the arguments: package, executable, name,
    namespace, output."""
    descs = [grounding_node_description()] if graph == "grounding" else eval_graph(bag="-", out="-")
    keep = ("package", "executable", "name", "namespace", "output")
    return [{k: d[k] for k in keep} for d in descs]


def node_parameters(graph: str, index: int, field: str, key: str, values: Mapping[str, str]) -> str:
    """One value of node ``index`` of ``graph`` for the launch arguments ``values``: its
    params file, the path of a params file holding its overrides (none: empty), or the
    target of input ``key`` (``key`` itself when not remapped)."""
    names, build = GRAPHS[graph]
    desc = build({name: values[name] for name in names})[index]
    params = desc["parameters"]
    if field == "params_file":
        return str(params[0])
    if field == "remap":
        return str(dict(desc["remappings"]).get(key, key))
    overrides = params[1] if len(params) > 1 else {}
    with tempfile.NamedTemporaryFile("w", prefix="probench_launch_params_", suffix=".yaml",
                                     delete=False, encoding="utf-8") as fh:
        yaml.safe_dump({"/**": {"ros__parameters": dict(overrides)}}, fh, allow_unicode=True)
    return fh.name


class FromGraph(Substitution):  # type: ignore[misc]  # launch has no type information
    """A launch substitution: :func:`node_parameters` of the launch configurations."""

    def __init__(self, graph: str, index: int, field: str, key: str = "") -> None:
        super().__init__()
        if graph not in GRAPHS or field not in FIELDS:
            raise ValueError(f"no {field!r} of graph {graph!r}")
        self.graph, self.index, self.field, self.key = graph, index, field, key

    def describe(self) -> str:
        what = f"remap {self.key}" if self.field == "remap" else self.field
        return f"probench {self.graph} graph, node {self.index}: {what} (from the launch arguments)"

    def perform(self, context: LaunchContext) -> str:
        return node_parameters(self.graph, self.index, self.field, self.key, context.launch_configurations)
