"""ament_python build of probench (colcon) and a plain pip install (the venv) alike."""

from glob import glob

from setuptools import find_namespace_packages, setup

PACKAGE = "probench"

setup(
    name=PACKAGE,
    version="0.1.0",
    package_dir={"": "src"},
    # namespace packages too, so the data folders (report/data, console/static) are packages
    # setuptools knows about rather than "importable but ignored" ones
    packages=find_namespace_packages("src", include=["probench*"], exclude=["*.__pycache__"]),
    include_package_data=True,
    package_data={"probench.report": ["data/*.csv"], "probench.console": ["static/*"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml") + glob("config/*.xml")
         + glob("config/*.rviz") + glob("config/*.json")),
    ],
    python_requires=">=3.10",
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="probench developers",
    maintainer_email="probench@example.org",
    description="Prompt-robust open-vocabulary grounding for ROS 2, and the Pro-Bench benchmark.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "probench = probench.cli:main",
            "grounding_node = probench.ros.grounding_node:main",
            "evaluator_node = probench.ros.evaluator_node:main",
        ],
    },
)
