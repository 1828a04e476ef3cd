"""Extractive question answering (SQuAD 1.1 and 2.0), as the official ELECTRA code does it.

- `squad`: SQuAD files in, question windows out
- `model`: `ElectraQuestionAnswerer`, the official and the plain span heads
- `answers`: the official post-processing, from each window's outputs to one answer per question
- `metrics`: the official SQuAD scores (exact match, F1; for 2.0 the no-answer threshold)
- `task`: `QuestionAnsweringTask`, the trainer's task
"""
