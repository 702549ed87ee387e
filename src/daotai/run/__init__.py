"""The pipeline layer: one render, from a plan to a delivered output folder.

``daotai.run.pipeline.run`` renders, encodes, assembles, checks and delivers; beside it, at the
same level because each drives or measures whole renders, sit the shot cache (``cache``), takes
per shot (``retakes``), the fidelity-gated encoder (``encoder_choice``), ``daotai qc DIR``'s
recheck (``recheck``), --dry-run's estimate (``estimate``) and the stages' progress labels
(``progress_labels``). Front ends (cli, server, cluster, comfy …) build on this package; nothing
below it imports it. Importing the package imports none of its modules.
"""
