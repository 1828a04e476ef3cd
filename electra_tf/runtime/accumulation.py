"""Gradient accumulation: one update from the gradients of several micro-batches.

A step receives the update's whole batch (K micro-batches, stacked along the batch axis) and
`accumulate_gradients` runs the model's loss-and-gradients function on each micro-batch in turn
inside one `tf.while_loop`, summing the gradients. The caller makes each micro-batch's loss its
share of the whole batch's loss (a sum divided by the whole batch's count), so the sum is exactly
the large batch's gradient: ELECTRA's losses are means over masked positions and over tokens,
whose counts differ between micro-batches, so averaging K micro-batch means would not be.

Inside the step, not across steps: a stop (SIGTERM, a lost worker) lands between updates, so a
checkpoint never holds half an update, and the step count, the learning-rate schedule, float16's
skip decision (made once, on the summed gradient) and the input's position all count updates.
A loop rather than K copies of the graph keeps the traced and compiled program the size of one
micro-batch's, whatever K is; memory holds one micro-batch's activations plus one copy of the
gradients.
"""

from __future__ import annotations

import tensorflow as tf


def pad_batch(batch, num_micro_batches: int):
    """`batch` (a nest of tensors, first axis the examples) padded with zero rows to K equal
    micro-batches, and a float32 [padded] vector that is 1 for real rows and 0 for the padding.

    A batch whose size is a multiple of K (every pre-training batch) is returned as it is. The
    padded size is ceil(n / K) x K, a value XLA knows when it compiles (the batch's shape)."""
    first = _first_tensor(batch)
    size = tf.shape(first)[0]
    padded = (size + num_micro_batches - 1) // num_micro_batches * num_micro_batches
    if first.shape[0] is not None and first.shape[0] % num_micro_batches == 0:
        return batch, tf.ones([first.shape[0]], tf.float32)

    def pad(t):
        if t is None:
            return None
        return tf.pad(t, tf.concat([[[0, padded - size]], tf.zeros([t.shape.rank - 1, 2], tf.int32)], axis=0))

    return tf.nest.map_structure(pad, batch), pad(tf.ones([size], tf.float32))


def _first_tensor(batch):
    return next(t for t in tf.nest.flatten(batch) if t is not None)


def accumulate_gradients(gradients_and_outputs, batch, num_micro_batches: int, variables, signature=None):
    """Sums the gradients of `gradients_and_outputs(micro_batch, index)` over the K micro-batches
    of `batch` (a nest of tensors whose first axis, the examples, divides by K: `pad_batch`), and
    collects its outputs.

    `gradients_and_outputs` returns (gradients, per_example, totals): a list of gradients, one per
    variable (None for a variable without one), a nest of tensors whose first axis is the
    micro-batch's examples (concatenated over the micro-batches, so they read as the whole
    batch's), and a nest of tensors summed over the micro-batches.

    `signature`: (a nest of `tf.TensorSpec` of one example of `per_example`, a nest of
    `tf.TensorSpec` of `totals`), when the caller knows them; otherwise they are read from a
    trace of the function that is never run (the time of one more trace).

    Returns (gradients, per_example, totals), gradients as dense tensors (None where the function
    gave None).
    """
    first = _first_tensor(batch)
    static_size = first.shape[0]
    if static_size is not None and static_size % num_micro_batches:
        raise ValueError(f"a batch of {static_size} does not split into {num_micro_batches} equal micro-batches "
                         "(pad_batch pads it).")
    size = static_size // num_micro_batches if static_size is not None else tf.shape(first)[0] // num_micro_batches

    def micro_batch(index):
        return _micro_batch(batch, index, size)

    if signature is None:
        # Traced once more in a scratch function (never run) for the outputs' structure.
        probe = tf.function(lambda: gradients_and_outputs(micro_batch(tf.constant(0)), tf.constant(0)),
                            autograph=False).get_concrete_function().structured_outputs
        signature = (tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), probe[1]),
                     tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), probe[2]))
    per_example_specs, total_specs = (tf.nest.flatten(part) for part in signature)
    # Which gradients are None is read from the body's trace; the loop carries zeros for all.
    none_gradients = []

    def body(index, sums, totals, arrays):
        gradients, per_example, micro_totals = gradients_and_outputs(micro_batch(index), index)
        none_gradients[:] = [g is None for g in gradients]
        sums = [s if g is None else s + tf.cast(tf.convert_to_tensor(g), s.dtype) for s, g in zip(sums, gradients)]
        totals = [t + tf.cast(m, t.dtype) for t, m in zip(totals, tf.nest.flatten(micro_totals))]
        arrays = [array.write(index, value) for array, value in zip(arrays, tf.nest.flatten(per_example))]
        return index + 1, sums, totals, arrays

    micro_shape = tf.TensorShape([size if static_size is not None else None])
    start = (tf.constant(0), [tf.zeros(v.shape, v.dtype) for v in variables],
             [tf.zeros(spec.shape, spec.dtype) for spec in total_specs],
             [tf.TensorArray(spec.dtype, size=num_micro_batches, element_shape=micro_shape.concatenate(spec.shape))
              for spec in per_example_specs])
    _, sums, totals, arrays = tf.while_loop(
        lambda index, *_: index < num_micro_batches, body, start,
        parallel_iterations=1)  # in order: the layers' dropout seeds advance once per micro-batch
    gradients = [None if none else s for none, s in zip(none_gradients, sums)]
    per_example = [_concatenated(array, static_size, spec) for array, spec in zip(arrays, per_example_specs)]
    return (gradients, tf.nest.pack_sequence_as(signature[0], per_example),
            tf.nest.pack_sequence_as(signature[1], totals))


def _micro_batch(batch, index, size):
    """Micro-batch `index` of `size` examples of a nest of tensors."""
    def part(t):
        if t is None:
            return None
        begin = tf.concat([[index * size], tf.zeros([t.shape.rank - 1], tf.int32)], axis=0)
        return tf.slice(t, begin, tf.concat([[size], tf.fill([t.shape.rank - 1], -1)], axis=0))
    return tf.nest.map_structure(part, batch)


def _concatenated(array, static_size, spec):
    """A TensorArray of the micro-batches' per-example outputs, [K, micro-batch, ...], as the
    whole batch's [K x micro-batch, ...]."""
    stacked = array.stack()
    return tf.ensure_shape(tf.reshape(stacked, tf.concat([[-1], tf.shape(stacked)[2:]], axis=0)),
                           tf.TensorShape([static_size]).concatenate(spec.shape))
