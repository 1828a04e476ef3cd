"""The workarounds that need a private part of Keras, in one place.

Everything else in the package uses public APIs of TensorFlow, Keras, keras-hub and tf-text.
Each workaround here names the upstream issue it works around and the versions it was checked
on (TensorFlow 2.21, Keras 3.15: the pins in setup.py), and tests/test_compat.py fails if
upstream changes the behaviour it relies on, so a new release is checked before it is allowed
in. Remove a workaround when its issue is fixed in the pinned release.
"""

from __future__ import annotations

import tensorflow as tf

CHECKED_ON = {"tensorflow": "2.21", "keras": "3.15"}


class BuiltModelsSkipSymbolicBuild:
    """Mixin for a `keras.Model` whose layers and optimizer are built before `fit`.

    keras-team/keras#20585: under a distribution strategy, Keras' `fit` calls the private
    `Trainer._maybe_symbolic_build`, which pulls one batch out of fit's own iterator only to
    build what is unbuilt. That batch never reaches a step, so a run's input position would be
    off by one (exact resume needs every batch), and under MultiWorkerMirroredStrategy the pull
    fails outright ("unsupported type PerReplica"). The pre-trainer builds its layers in
    `__init__` and its `compile` builds the optimizer (`runtime.compiled_step`): there is nothing
    to build, so the pull is skipped. Overrides the private hook (no public way to keep Keras from pulling).
    """

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if self.optimizer is not None and self.optimizer.built:
            return
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)


def logs_for_keras_reduction(logs: dict) -> dict:
    """A step's logs shaped so that Keras can reduce them over the workers of a
    MultiWorkerMirroredStrategy.

    keras-team/keras#20329: Keras' train function reduces a step's logs with
    `strategy.reduce("MEAN", value, axis=0)` under MultiWorkerMirroredStrategy, which fails on
    scalars ("Invalid reduction dimension 0"). Shape [1] per replica reduces to the scalar
    Keras reports, and the value is unchanged when every replica's logs are already the global
    metrics (the pre-trainer's are). Other strategies get the logs as they are.
    """
    if not isinstance(tf.distribute.get_strategy(), tf.distribute.MultiWorkerMirroredStrategy):
        return logs
    return {name: tf.reshape(value, [1]) for name, value in logs.items()}
