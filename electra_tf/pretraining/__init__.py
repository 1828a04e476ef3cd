"""Pre-training: the ELECTRA objective (and the MLM baseline) as a task of the one trainer.

- `config`: `PretrainingConfig`, by section: model, objective, optimizer, run; the presets
- `phases`: what a rerun may change in a model_dir's run (extensions, a new phase): a pure policy
- `data`: what a run reads (the bundled sample, build_data folders, raw text) and evaluates on
- `masking`: `mask_tokens`, ELECTRA's dynamic masking, in the graph
- `input_pipeline`: shards (or raw text) -> masked, fixed-shape tf.data batches
- `losses`: the ELECTRA equations, one function each (sampling, corruption, labels, losses)
- `pretrainer`: `ElectraPretrainer`, the Keras model whose `train_step` is the ELECTRA step
- `task`: `PretrainingTask`, what the trainer asks of pre-training; the backbone written at its end
- `evaluation`, `samples`: held-out metrics and health warnings; TensorBoard replacement panels
- `restore`: a run's networks from a checkpoint, `--init_from`
- `synthetic`: a synthetic token language for tests and docstring examples
"""
