"""Start the live grounding node (docs/GROUNDING_NODE.md).

    ros2 launch probench grounding.launch.py image_topic:=/camera/color/image_raw \\
        prompt:="a red backpack; a fire extinguisher" model:=owlv2-b device:=cuda
    ros2 launch probench grounding.launch.py --show-args

Declarative: one ``DeclareLaunchArgument`` per row of
:data:`probench.realtime.node_spec.LAUNCH_ARGUMENTS` and one ``Node`` whose parameters and
remappings are substitutions of those arguments (:class:`probench.ros.launch_graph.FromGraph`,
through the same table as ``grounding_from_arguments``). The node declares its parameters
itself; it gets ``params_file`` (default: the package's config/grounding.yaml) plus overrides
for the arguments given (an empty argument leaves the file's value). Arguments are parsed as
plain strings, never evaluated. ``image_topic`` moves both image inputs (``<image_topic>``
and ``<image_topic>/compressed``). Unless you chose a Fast DDS profile, the launch's
processes get probench's (``config/fastdds.xml``: whole camera frames over shared memory,
:mod:`probench.ros.dds_profile`). ``launch``/``launch_ros`` are imported inside
:func:`generate_launch_description`, so this file also imports where they are absent.
"""

import os


def generate_launch_description():
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, SetEnvironmentVariable
    from launch_ros.actions import Node

    from probench.realtime.node_spec import LAUNCH_ARGUMENTS
    from probench.ros.dds_profile import profile_environment
    from probench.ros.launch_graph import REMAPPED, FromGraph, static_nodes

    declared = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, (default, description) in LAUNCH_ARGUMENTS.items()
    ]
    environment = [SetEnvironmentVariable(k, v) for k, v in profile_environment(os.environ).items()]
    (static,) = static_nodes("grounding")
    node = Node(
        **static,
        parameters=[FromGraph("grounding", 0, "params_file"), FromGraph("grounding", 0, "overrides")],
        remappings=[(key, FromGraph("grounding", 0, "remap", key)) for key in REMAPPED],
    )
    return LaunchDescription([*declared, *environment, node])
