"""``probench ground``: run a detector over the camera topic of any rosbag2 and write what a
grounding node would have published, as a new mcap (plus an annotated video and JSONL).

- :mod:`.prompts`: the prompt timeline (``--prompt``, ``--prompt-schedule``, a recorded
  prompt topic);
- :mod:`.replay`: the grounding node's worker rules on the bag's clock (every frame, or
  ``--realtime``'s newest-frame policy);
- :mod:`.frames`: one frame, decoded and grounded as the node does it;
- :mod:`.outputs`: the output bag and the JSONL; :mod:`.video`: the MP4;
- :mod:`.summary`: the numbers printed at the end;
- :mod:`.cli`: the command.

The user's page is docs/GROUND.md.
"""
