"""Prompt-robust grounding: an operator's query becomes the paper's formulations (``orig``,
``cat``, ``tmpl``; :mod:`.derive`), a prompt policy chooses what the model is given
(:mod:`.policy`), a formulation profile names each model's best formulation
(:mod:`.profile`), and the ensemble's answers are fused per operator prompt
(:mod:`.fusion`). No rclpy, no torch: the node, the CLIs and the evaluator share it.
Users' page: docs/PROMPTING.md.
"""
