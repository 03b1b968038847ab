"""Start the live grounding node (docs/GROUNDING_NODE.md).

    ros2 launch probench grounding.launch.py image_topic:=/camera/color/image_raw \\
        prompt:="a red backpack; a fire extinguisher" model:=owlv2-b device:=cuda

A thin layer over :mod:`probench.realtime.node_spec`: the node declares its parameters itself;
this file only passes ``params_file`` (default: the package's config/grounding.yaml) plus
overrides for the arguments given (an empty argument leaves the file's value). Arguments
are parsed as plain strings, never evaluated. ``image_topic`` moves both image inputs
(``<image_topic>`` and ``<image_topic>/compressed``). Unless you chose a Fast DDS profile,
the launch's processes get probench's (``config/fastdds.xml``: whole camera frames over
shared memory, :mod:`probench.ros.dds_profile`). ``launch``/``launch_ros`` are imported inside
:func:`generate_launch_description`, so this file also imports where they are absent.
"""

import os


def generate_launch_description():
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    from probench.realtime.node_spec import LAUNCH_ARGUMENTS, grounding_from_arguments
    from probench.ros.dds_profile import profile_environment

    def node(context, *args, **kwargs):
        values = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
        env = profile_environment(getattr(context, "environment", None) or os.environ)
        node = Node(**grounding_from_arguments(values))
        return [*(SetEnvironmentVariable(k, v) for k, v in env.items()), node]

    declared = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, (default, description) in LAUNCH_ARGUMENTS.items()
    ]
    return LaunchDescription([*declared, OpaqueFunction(function=node)])
