"""Training: the one trainer that runs every kind of run (pre-training and each kind of fine-tuning).

- `task`: `Task`, what a kind of run gives the trainer, and its `TaskReport`; `TrainingPlan`,
  `TrainingData`; the registry of kinds (`KINDS`, `register_task`) every command finds them in
- `trainer`: `Trainer`, a run from the runtime's start to its metrics.json, or an evaluation alone
- `config`: `TrainerConfig`, the trainer's cadence (logs, checkpoints, evaluations)
- `callbacks`: progress and TensorBoard, signals, checkpoints on schedule, the profiler
- `evaluation`: evaluations during training, keeping the best one's weights where asked
- `checkpointing`, `resumable_input`: exact resume (model, optimizer, random and input state)
- `history`: the run's processes (processes.json), which metrics.json sums
- `workers`: a multi-worker run's input shares, barrier and lost peers
"""
