"""Dropout drawn with the random-number algorithm named: Philox, every draw in the package.

TensorFlow's stateless random ops default to `alg="auto_select"`, which is Philox on CPUs and
GPUs with the seed scrambled into Philox's key and counter. Keras' `Dropout` (TensorFlow
backend) draws that way. Named (`alg="philox"`), TensorFlow scrambles the seed the same way in
its own graph ops (`random_ops_util._philox_scramble_seed`, "the same scrambling procedure" as
the kernel), so the numbers are the same bit for bit, eagerly and under XLA, on CPU and GPU
(tests/models/test_dropout.py checks it against Keras' `Dropout` on CPU). What changes is what
XLA has to compile: for `auto_select` XLA's `StatelessRandomGetKeyCounter` kernel emits
`ScramblePhiloxKey`, 267 scalar instructions per dropout and 19,758 of the 65,521 in
ELECTRA-Small's training step (74 dropouts), where the named scramble takes about 37.
Measured on the 2 CPU cores (ELECTRA-Small, XLA, docs/results.md): 65,521 -> 48,511 HLO
instructions, and a fresh run's first step (build, tracing and compiling) 34.0 and 33.5 s
against 39.9 and 42.2 s; the compiled kernels are alike (the same fusions), so the steps after
it should not be faster.

`Dropout` is Keras' layer with only `call` changed: the same seed generator (created and
advanced as Keras' does, so a checkpoint holds the same variables), rate and config.
Masking, the generator's sampling and the replica seeds name `RNG_ALGORITHM` too.
"""

from __future__ import annotations

import keras
import tensorflow as tf

RNG_ALGORITHM = "philox"


def stateless_dropout(x, rate: float, seed):
    """Inverted dropout of `x` (keep with probability 1 - rate, scale by 1 / (1 - rate)), drawn
    from the int32 [2] `seed` with Philox: `tf.nn.experimental.stateless_dropout` with the
    algorithm named."""
    return tf.nn.experimental.stateless_dropout(x, rate, seed=seed, rng_alg=RNG_ALGORITHM)


def draw_seed(seed_generator):
    """The next int32 [2] seed from a Keras `SeedGenerator`, turned as Keras' TensorFlow backend
    turns it (its state is int64; stateless ops under XLA want int32)."""
    return tf.cast(tf.math.floormod(seed_generator.next(), tf.int32.max - 1), tf.int32)


@keras.saving.register_keras_serializable(package="electra_tf")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` drawing with `stateless_dropout` (Philox named): the same numbers, fewer
    instructions under XLA (module docstring).

    >>> import numpy as np
    >>> x = np.ones((2, 1000), "float32")
    >>> y = np.asarray(Dropout(0.1, seed=3)(x, training=True))
    >>> bool(abs((y == 0).mean() - 0.1) < 0.03), sorted({round(float(v), 4) for v in y.ravel()})
    (True, [0.0, 1.1111])
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        if noise_shape is not None:
            raise ValueError("electra_tf's Dropout draws one number per element: noise_shape is not supported.")
        super().__init__(rate, seed=seed, **kwargs)

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return stateless_dropout(inputs, self.rate, draw_seed(self.seed_generator))
        return inputs
