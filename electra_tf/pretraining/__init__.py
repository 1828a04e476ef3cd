"""Stage 3, pre-training: masking, the ELECTRA objective and the training step.

- `masking`: `mask_tokens`, ELECTRA's dynamic masking, in the graph
- `input_pipeline`: shards (or raw text) -> masked, fixed-shape tf.data batches
- `losses`: the ELECTRA equations, one function each (sampling, corruption, labels, losses)
- `pretrainer`: `ElectraPretrainer`, the Keras model whose `train_step` is the ELECTRA step
- `resumable_input`: `ResumableInput`, `InputTracker`: the run's input, whose position checkpoints hold
- `checkpointing`: `RunCheckpoint`: exact resume, checkpoints written in the background
- `callbacks`: progress and TensorBoard, checkpoints on schedule and signal, samples, profiler
- `run`: `run_pretraining`, the whole run behind `python -m electra_tf.pretrain`
- `synthetic`: a synthetic token language for tests and docstring examples
"""
