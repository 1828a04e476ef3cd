"""Dropout drawn with the random-number algorithm named: Philox, every draw in the package.

TensorFlow's stateless random ops default to `alg="auto_select"` (Philox on CPUs and GPUs, the
seed scrambled into Philox's key and counter), which is how Keras' `Dropout` draws. Named
(`alg="philox"`), TensorFlow scrambles the seed the same way in its graph ops, so the numbers
are Keras' bit for bit (tests/models/test_dropout.py), while XLA compiles the named draw to a few
dozen instructions instead of several hundred per dropout: a smaller program, a shorter first
step. Eager and XLA-compiled steps draw other numbers from one seed (TensorFlow's Philox kernel
and XLA's lowering of it differ), so a step under XLA draws other dropout masks than the same
step without it.

`Dropout` is Keras' layer with only `call` changed: the same seed generator, rate and config.
Masking and the replica seeds name `RNG_ALGORITHM` too.

`keep_masks` is the transformer layer's dropout (`transformer.py`): the masks of a layer's
three dropouts from one Philox draw, keyed by the seed itself. A deliberate departure from
Keras' (and keras-hub's) streams, for the GPU: a draw per dropout launches several small
kernels (the seed's copy and scramble, conversions of the key and counter, the draw), a large
share of a step's launches and of XLA's compile; and 16 random bits an element (two from each
32-bit Philox output), for the CPU, where drawing the masks is most of dropout's cost. Each mask
element is still an independent keep with probability 1 - rate (to 2^-17: `keep_threshold`), as
in the official code (TensorFlow 1's stateful `tf.nn.dropout`), whose random numbers no
TensorFlow 2 program reproduces anyway. Philox, not ThreeFry, because TensorFlow's ThreeFry runs
only under XLA.
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


def keep_masks(shapes, rate: float, seed) -> list:
    """Dropout keep-masks (bool) of the given shapes (each a list of ints or scalar tensors),
    every element kept with probability 1 - rate (to 2^-17: `keep_threshold`), all from one
    Philox draw keyed by the int32 [2] `seed` (module docstring: one draw instead of one per
    dropout).

    Each element compares 16 random bits with the threshold, so one 32-bit Philox output gives
    two elements: half the random-number work of a float32 uniform per element, the largest
    part of dropout's cost on a CPU, and the same masks whatever the compute dtype (a bfloat16
    uniform has 8 bits).

    >>> masks = keep_masks([[2, 3], [4]], 0.5, tf.constant([1, 2]))
    >>> [tuple(mask.shape) for mask in masks], masks[0].dtype.name
    ([(2, 3), (4,)], 'bool')
    """
    # int64: the three masks of a large layer can hold more than 2^31 elements together.
    shapes = [tf.stack([tf.cast(dim, tf.int64) for dim in shape]) for shape in shapes]
    sizes = [tf.reduce_prod(shape) for shape in shapes]
    total = tf.add_n(sizes)
    # Philox's key is the seed's two 32-bit halves and its counter starts at 0, as TensorFlow
    # keys ThreeFry; Philox's rounds mix any key, so consecutive seeds give unrelated streams.
    halves = tf.cast(seed, tf.uint32)
    key = tf.bitwise.bitwise_or(tf.cast(halves[0], tf.uint64),
                                tf.bitwise.left_shift(tf.cast(halves[1], tf.uint64), tf.constant(32, tf.uint64)))
    bits = tf.raw_ops.StatelessRandomUniformFullIntV2(
        shape=tf.reshape((total + 1) // 2, [1]), key=tf.reshape(key, [1]), counter=tf.zeros([2], tf.uint64),
        alg=tf.random.Algorithm.PHILOX.value, dtype=tf.uint32)
    keep = tf.reshape(tf.bitcast(bits, tf.uint16), [-1]) >= tf.constant(keep_threshold(rate), tf.uint16)
    parts = tf.split(tf.slice(keep, tf.zeros([1], tf.int64), tf.reshape(total, [1])), tf.stack(sizes),
                     num=len(shapes))
    return [tf.reshape(part, shape) for part, shape in zip(parts, shapes)]


def keep_threshold(rate: float) -> int:
    """The 16-bit value at or above which `keep_masks` keeps an element: rate x 2^16 rounded, so
    an element is dropped with probability within 2^-17 of `rate` (0.1 -> 6,554 / 65,536 =
    0.100006). Kept elements are still scaled by 1 / (1 - rate).

    >>> keep_threshold(0.1), keep_threshold(0.5)
    (6554, 32768)
    """
    return min(round(rate * 2**16), 2**16 - 1)


def apply_keep_mask(x, keep, rate: float):
    """Inverted dropout of `x` with a `keep_masks` mask: kept elements scaled by 1 / (1 - rate),
    the others 0, computed as TensorFlow's dropout computes them; `keep=None` returns `x`."""
    if keep is None:
        return x
    return tf.where(keep, x * tf.cast(1.0 / (1.0 - rate), x.dtype), tf.zeros([], x.dtype))


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
