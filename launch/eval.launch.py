"""Replay a probench bag through the grounding node and score it (docs/EVALUATOR_NODE.md).

    ros2 launch probench eval.launch.py bag:=bags/probench-sample out:=runs/sample model:=tiny-owlv2
    ros2 launch probench eval.launch.py --show-args

Declarative, over :mod:`probench.ros.graph` (the same graph ``probench eval`` runs): one
``DeclareLaunchArgument`` per row of ``EVAL_ARGUMENTS``, one ``Node`` per node of the graph
whose parameters and remappings are substitutions of those arguments
(:class:`probench.ros.launch_graph.FromGraph`, through ``eval_graph_from_arguments``: an
empty argument leaves the params file's value, text is parsed, never evaluated), and a
shutdown when the evaluator exits. Unless you chose a Fast DDS profile, both nodes get
probench's (``config/fastdds.xml``, :mod:`probench.ros.dds_profile`). ``launch``/``launch_ros``
are imported inside :func:`generate_launch_description` only, so this file also imports
where they are absent.
"""

import os


def generate_launch_description():
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, RegisterEventHandler, SetEnvironmentVariable, Shutdown
    from launch.event_handlers import OnProcessExit
    from launch_ros.actions import Node

    from probench.ros.dds_profile import profile_environment
    from probench.ros.graph import EVAL_ARGUMENTS, EVALUATOR_EXECUTABLE
    from probench.ros.launch_graph import REMAPPED, FromGraph, static_nodes

    declared = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, (default, description) in EVAL_ARGUMENTS.items()
    ]
    actions = [SetEnvironmentVariable(k, v) for k, v in profile_environment(os.environ).items()]
    for i, static in enumerate(static_nodes("eval")):
        node = Node(
            **static,
            parameters=[FromGraph("eval", i, "params_file"), FromGraph("eval", i, "overrides")],
            remappings=[(key, FromGraph("eval", i, "remap", key)) for key in REMAPPED],
        )
        actions.append(node)
        if static["executable"] == EVALUATOR_EXECUTABLE:
            shutdown = Shutdown(reason="evaluator finished")
            actions.append(RegisterEventHandler(OnProcessExit(target_action=node, on_exit=[shutdown])))
    return LaunchDescription([*declared, *actions])
