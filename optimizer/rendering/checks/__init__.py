"""``ptplan render --check``: the rendered files read back and checked against the plan, rule
by rule (what a cluster would do with the rendered objects).

``cluster`` (:func:`~ptplan.rendering.checks.cluster.check_render`, the entry point; rules
``pools``, ``admission``, ``taints``, ``disks``, ``tags``), ``cpu_pools`` (the CPU node
pools), ``roles`` (each framework role pinned to its pool's Ray resource), ``gpudirect``
(GPUDirect-TCPX(O) on GKE A3 trainers), ``paths`` (checkpoint paths under lifecycle rules, the
entrypoint's words), ``readers`` (YAML, Terraform and RayJob readers).

May import the renderers of :mod:`ptplan.rendering` (their names, zones, resources and launcher
words are what the rules re-derive) and the layers below; the renderers never import the
checks (an import-linter contract in ``pyproject.toml``).
"""
