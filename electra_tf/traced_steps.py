"""A compiled step's traced graph kept on disk, so that a rerun, a resume or an extension of a
run calls its step without tracing it in Python again.

The compile cache (`runtime.use_compile_cache`) keeps XLA's compiled program between processes,
but TensorFlow finds a program by its HLO, which it lowers from the step's graph: every process
traced the step in Python first. On one H200 that was 5.9 s of a rerun's 24.0 s first step
(ELECTRA-Small; docs/performance.md), 4.7-5.0 s on the 2 CPU cores here, and the final
evaluation traced its step again. A trace is a function of the code, the model and the input's
shapes, so this module keeps its result: the step's FunctionDef, the graph TensorFlow runs
(15,845 nodes for ELECTRA-Small, 3 MB), with what calling it needs: which variables it reads,
by their position in a walk of the model that is the same in every process that builds the
model alike (`step_variables`; each checked by name, shape and dtype on load), and the names of
its outputs.

An entry is found by a key (`TracedStepCache.key`): the caller's description of what it built
(a pre-training run gives its config without `num_train_steps`, which an extension changes and
the step reads from a variable; a fine-tuning its options but its output's, its config and labels), the step's name, the input's element spec, the dtype policy,
the step's device, every variable's name, shape and dtype, the versions of TensorFlow, Keras
and keras-hub, a hash of this package's source, and the `ELECTRA_TF_*` environment variables
(`ELECTRA_TF_LOOP_LAYERS` changes the graph). Anything else that changes a trace is a change to
one of these. A missing, unreadable or mismatching entry is traced and written again (written
whole or not at all).

The step is called as TensorFlow calls a trace: registered with the eager context and run as an
op of its own (`context.call_function`, what `tf.function` uses; private, TensorFlow 2.21).
Its `_XlaMustCompile` attribute travels with it, so XLA compiles it or loads it from the compile
cache. A fresh run calls the registered copy as well, not its own trace: the trace's copy carries
Python's stack frames, which become the HLO's metadata and change the program's fingerprint, so a
rerun would have compiled once more. For the same reason the copy renames every function the
step calls (a float16 step's loss-scale `cond`, the layers' loop); the names are made from the
content (the trace's carry TensorFlow's process-wide counter), so they are the same in every
process.

Given up: a runtime error inside a loaded step names graph nodes without Python's stack frames.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from electra_tf.files import atomic_write_bytes
from electra_tf.runtime import COMPILE_CACHE_VARIABLE, TRACED_STEPS_FOLDER

FORMAT = 1  # the entries' layout; part of the key
_SOURCE = Path(__file__).resolve().parent


def step_variables(model) -> list:
    """Every tf.Variable a model's step may read, in an order that is the same in every process
    that builds and compiles the model alike: the model's, the optimizer's, its learning-rate
    schedule's (`optimization.WarmupLinearDecay` keeps the schedule's end in one), the metrics',
    then anything else the model tracks."""
    import tensorflow as tf

    found, seen = [], set()

    def add(candidates):
        for candidate in candidates:
            # A Keras variable holds its tf.Variable in `_value` (Keras 3, TensorFlow backend).
            variable = candidate if isinstance(candidate, tf.Variable) else getattr(candidate, "_value", None)
            if isinstance(variable, tf.Variable) and id(variable) not in seen:
                seen.add(id(variable))
                found.append(variable)

    add(model.variables)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None:
        add(optimizer.variables)
        for inner in (optimizer, getattr(optimizer, "inner_optimizer", None)):  # LossScaleOptimizer wraps one
            schedule = getattr(inner, "_learning_rate", None)  # Keras keeps a schedule there
            if schedule is not None and not isinstance(schedule, (int, float)):
                add(vars(schedule).values() if hasattr(schedule, "__dict__") else ())
    for metric in model.metrics:
        add(metric.variables)
    add(tf.train.TrackableView(model).descendants())
    return found


def _variable_signature(variable) -> list:
    return [variable.name, variable.shape.as_list() if variable.shape.rank is not None else None,
            variable.dtype.name]


def source_fingerprint() -> str:
    """A hash of this package's Python source (a changed module may change a trace)."""
    digest = hashlib.sha256()
    for path in sorted(_SOURCE.rglob("*.py")):
        digest.update(str(path.relative_to(_SOURCE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@dataclass
class TracedStep:
    """A step's FunctionDef registered with TensorFlow's eager context, called with a batch."""

    name: str  # the registered function's name
    variables: list  # the tf.Variables it reads, in its arguments' order (after the batch)
    outputs: list[str]  # the names of its outputs (a dict of tensors), in their order

    def __call__(self, batch):
        import tensorflow as tf
        from tensorflow.python.eager import context  # private: how tf.function calls a trace

        inputs = tf.nest.flatten(batch) + [variable.handle for variable in self.variables]
        flat = context.context().call_function(self.name.encode(), inputs, len(self.outputs))
        return dict(zip(self.outputs, flat))


class TracedStepCache:
    """Traced steps kept in `compile_cache`/traced_steps, one file per key (module docstring),
    beside the compiled programs they lead to.

    `description`: what the caller built, as JSON-able values (a run's config); part of every key.
    `loaded` and `saved` count this process's entries read and written (a run reports them).
    """

    def __init__(self, compile_cache: Path, description: dict):
        self.folder = Path(compile_cache) / TRACED_STEPS_FOLDER
        self.description = description
        self.loaded = 0
        self.saved = 0

    def key(self, step_name: str, element_spec, variables: list, device: str) -> str:
        import keras
        import keras_hub
        import tensorflow as tf

        parts = {
            "format": FORMAT, "description": self.description, "step": step_name,
            "element_spec": repr(element_spec), "dtype_policy": keras.config.dtype_policy().name,
            "device": device, "variables": [_variable_signature(v) for v in variables],
            "versions": [tf.__version__, keras.__version__, keras_hub.__version__, sys.version_info[:2]],
            "source": source_fingerprint(),
            "environment": sorted((name, value) for name, value in os.environ.items()
                                  if name.startswith("ELECTRA_TF_") and name != COMPILE_CACHE_VARIABLE),
        }
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.folder / f"{key[:32]}.step"

    def load(self, key: str, variables: list) -> TracedStep | None:
        """The entry for `key`, registered and ready to call; None when there is none or it does
        not fit (a damaged entry is reported on stderr and will be written again)."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            header, library = _read_entry(path)
            if header["key"] != key:
                raise ValueError("it was written for another key")
            read = []
            for index, signature in zip(header["variables"], header["variable_signatures"]):
                if index >= len(variables) or _variable_signature(variables[index]) != signature:
                    raise ValueError(f"variable {index} is not the {signature[0]} it was traced with")
                read.append(variables[index])
            arguments = len(library.function[-1].signature.input_arg)
            if arguments != header["flat_inputs"] + len(read):
                raise ValueError(f"its function takes {arguments} arguments, not the batch's and variables'")
            _register(library)
        except Exception as error:  # an unreadable entry costs a trace, never the run
            print(f"traced step {path} not used ({error}); tracing the step again", file=sys.stderr)
            return None
        self.loaded += 1
        return TracedStep(header["name"], read, header["outputs"])

    def save(self, key: str, step_name: str, concrete, variables: list) -> TracedStep | None:
        """Writes `concrete` (the traced step) for `key`, registers its copy and returns it; None
        (with the reason on stderr) when it cannot be kept: its outputs are not a dict of tensors,
        or it reads a variable `variables` does not hold."""
        import tensorflow as tf

        outputs = concrete.structured_outputs
        if not (isinstance(outputs, dict) and all(isinstance(v, tf.Tensor) for v in outputs.values())):
            return _not_kept(step_name, "its outputs are not a dict of tensors")
        position = {id(variable.handle): index for index, variable in enumerate(variables)}
        flat_inputs = len(concrete.inputs) - len(concrete.captured_inputs)
        indices = [position.get(id(captured)) for captured in concrete.captured_inputs]
        if None in indices:
            return _not_kept(step_name, f"it reads {indices.count(None)} tensor(s) that are not the model's variables")

        library = _renamed_copy(concrete, step_name)
        top = library.function[-1]
        names = sorted(outputs)  # tf.nest flattens a dict by sorted keys, as the trace did
        header = {"key": key, "name": top.signature.name, "flat_inputs": flat_inputs, "outputs": names,
                  "variables": indices, "variable_signatures": [_variable_signature(variables[i]) for i in indices]}
        try:
            _register(library)
        except ValueError as error:
            return _not_kept(step_name, str(error))
        try:
            _write_entry(self.path(key), header, library)
            self.saved += 1
        except OSError as error:  # a full or read-only disk costs the next run a trace, not this one
            print(f"traced step not written to {self.path(key)} ({error}); the next run traces it again",
                  file=sys.stderr)
        return TracedStep(top.signature.name, [variables[i] for i in indices], names)


def _not_kept(step_name: str, reason: str) -> None:
    print(f"the traced {step_name} is not kept for reruns: {reason}", file=sys.stderr)
    return None


def _renamed_copy(concrete, step_name: str):
    """The trace's function and every function it calls (a `tf.cond`'s branches, ...), as a
    FunctionDefLibrary with the step last, each renamed `electra_tf_<step>_<digest>[_<its name>]`
    (the digest of them all) and every call to them renamed alike.

    Renamed because TensorFlow has already registered the trace's own functions in this process,
    with Python's stack frames, which become the HLO's metadata: a called function found under its
    old name would lower with them in the fresh run and without them in a rerun, two programs
    (measured: a float16 step's loss-scale `cond` compiled again in every rerun)."""
    from tensorflow.core.framework import function_pb2

    top = function_pb2.FunctionDef()
    top.CopyFrom(concrete.function_def)
    called = list(concrete.graph.as_graph_def().library.function)
    digest = hashlib.sha256()
    for function in called + [top]:
        digest.update(function.SerializeToString(deterministic=True))
    prefix = f"electra_tf_{step_name}_{digest.hexdigest()[:20]}"
    renames = {function.signature.name: f"{prefix}_{function.signature.name}" for function in called}
    renames[top.signature.name] = prefix
    library = function_pb2.FunctionDefLibrary()
    for function in called + [top]:
        copy = library.function.add()
        copy.CopyFrom(function)
        copy.signature.name = renames[function.signature.name]
        for node in copy.node_def:
            if node.op in renames:  # a function called as an op of its own
                node.op = renames[node.op]
            for value in node.attr.values():
                _rename_calls(value, renames)
    return library


def _rename_calls(value, renames: dict) -> None:
    """Renames the functions an attribute names (If's branches, While's body, a call's `f`)."""
    functions = list(value.list.func) if value.HasField("list") else []
    if value.HasField("func"):
        functions.append(value.func)
    for function in functions:
        function.name = renames.get(function.name, function.name)
        for inner in function.attr.values():
            _rename_calls(inner, renames)


def _register(library) -> None:
    """Adds the library's functions to the eager context (a function already there with the same
    definition is left; one with another definition under the same name is an error)."""
    from tensorflow.python.eager import context

    ctx = context.context()
    for function in library.function:
        name = function.signature.name
        if ctx.has_function(name):
            if ctx.get_function_def(name).SerializeToString(deterministic=True) != function.SerializeToString(
                    deterministic=True):
                raise ValueError(f"another function named {name} is already defined in this process")
            continue
        ctx.add_function_def(function)


def _write_entry(path: Path, header: dict, library) -> None:
    """One JSON line, then the FunctionDefLibrary, written whole or not at all."""
    atomic_write_bytes(path, json.dumps(header).encode() + b"\n" + library.SerializeToString())


def _read_entry(path: Path):
    from tensorflow.core.framework import function_pb2

    data = path.read_bytes()
    line, _, body = data.partition(b"\n")
    header = json.loads(line)
    if header.get("key") is None:
        raise ValueError("no header")
    library = function_pb2.FunctionDefLibrary()
    library.ParseFromString(body)
    if not library.function or library.function[-1].signature.name != header["name"]:
        raise ValueError("its functions do not match its header")
    return header, library
