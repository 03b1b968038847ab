"""Replay a probench bag through the grounding node and score it (docs/EVALUATOR_NODE.md).

    ros2 launch probench eval.launch.py bag:=bags/probench-sample out:=runs/sample model:=tiny-owlv2

A thin layer over :mod:`probench.ros.graph` (the same graph ``probench eval`` runs): every
argument is declared here, the nodes come from ``eval_graph_from_arguments`` and the launch
shuts down when the evaluator exits; unless you chose a Fast DDS profile, both nodes get
probench's (``config/fastdds.xml``, :mod:`probench.ros.dds_profile`). ``launch``/``launch_ros``
are imported inside :func:`generate_launch_description` only, so this file also imports
where they are absent.
"""

import os


def generate_launch_description():
    from launch import LaunchDescription
    from launch.actions import (
        DeclareLaunchArgument,
        OpaqueFunction,
        RegisterEventHandler,
        SetEnvironmentVariable,
        Shutdown,
    )
    from launch.event_handlers import OnProcessExit
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    from probench.ros.dds_profile import profile_environment
    from probench.ros.graph import EVAL_ARGUMENTS, EVALUATOR_EXECUTABLE, eval_graph_from_arguments

    def nodes(context, *args, **kwargs):
        values = {name: LaunchConfiguration(name).perform(context) for name in EVAL_ARGUMENTS}
        env = profile_environment(getattr(context, "environment", None) or os.environ)
        actions = [SetEnvironmentVariable(k, v) for k, v in env.items()]
        for desc in eval_graph_from_arguments(values):
            node = Node(**desc)
            actions.append(node)
            if desc["executable"] == EVALUATOR_EXECUTABLE:
                actions.append(
                    RegisterEventHandler(
                        OnProcessExit(
                            target_action=node,
                            on_exit=[Shutdown(reason="evaluator finished")],
                        )
                    )
                )
        return actions

    declared = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, (default, description) in EVAL_ARGUMENTS.items()
    ]
    return LaunchDescription([*declared, OpaqueFunction(function=nodes)])
