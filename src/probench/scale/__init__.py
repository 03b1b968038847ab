"""Scale-out on Ray: ``probench infer --ray`` and ``probench sweep`` (docs/SCALE.md).

- :mod:`~probench.scale.options`: the ``--ray``/``--workers`` flags and the typed
  ``RayOptions`` they become (light: no ray import).
- :mod:`~probench.scale.cluster`: connect to a cluster (``--ray ADDRESS``, ``RAY_ADDRESS``)
  or start a local one bound to loopback, and leave nothing behind.
- :mod:`~probench.scale.plan`: the work plan: chunks of (formulation, images), exactly-once
  bookkeeping, retries of a lost worker's images (pure Python, no Ray).
- :mod:`~probench.scale.worker`: what runs in a Ray worker (model loaded once per actor).
- :mod:`~probench.scale.ray_infer`: the driver: the one writer of the run folder, through
  the same run identity and prediction cache as a single-process run.
- :mod:`~probench.scale.sweep`: infer, latency, score for many models, then one report
  (:mod:`~probench.scale.cli_sweep` is ``probench sweep``).
"""
