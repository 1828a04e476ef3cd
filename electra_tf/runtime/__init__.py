"""The runtime: where and how a step runs, between the models and the stages that train them.

- `devices`: `resolve_runtime` (strategy, precision, XLA: `auto` or asked, with the reason) and
  `create_strategy`
- `xla`: XLA's persistent compilation cache and the XLA flags a run sets
- `compiled_step`: the training step under XLA (whole, or each replica's gradients under a
  mirrored strategy) and the loop that feeds it
- `optimizer`: ELECTRA's AdamW (flat moments, clipping of the summed gradient), LAMB, the
  learning-rate schedule
- `cluster`: a worker's role in a multi-worker job (TF_CONFIG)
- `check`: `python -m electra_tf --check`
"""
