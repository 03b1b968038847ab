"""Replay a probench bag through the grounding node and score it (CONTRACTS.md §5).

    ros2 launch probench eval.launch.py bag:=bags/probench-sample out:=runs/sample model:=tiny-owlv2

A thin layer over :mod:`probench.ros.graph` (the same graph ``probench eval`` runs): every
argument is declared here, the nodes come from ``eval_graph_from_arguments`` and the launch
shuts down when the evaluator exits. ``launch``/``launch_ros`` are imported inside
:func:`generate_launch_description` only, so this file also imports where they are absent.
"""


def generate_launch_description():
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction, RegisterEventHandler, Shutdown
    from launch.event_handlers import OnProcessExit
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    from probench.ros.graph import EVAL_ARGUMENTS, EVALUATOR_EXECUTABLE, eval_graph_from_arguments

    def nodes(context, *args, **kwargs):
        values = {name: LaunchConfiguration(name).perform(context) for name in EVAL_ARGUMENTS}
        actions = []
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
