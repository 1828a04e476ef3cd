"""Our ELECTRA against transformers' PyTorch ELECTRA: same initial weights, same batches, same
hyper-parameters. Needs the optional extra: pip install -e ".[reference]" (torch, transformers).

    python benchmarks/reference_parity.py                          # the electra_tiny preset
    python benchmarks/reference_parity.py --set position_embedding_init=sinusoidal --steps 2000
    python benchmarks/reference_parity.py --save runs/parity   # then fine-tune both (docs/results.md)

1. Batches come from our tf.data pipeline (the bundled Wikipedia sample, masked in-graph) and
   are dumped once; both implementations train on exactly these, and are evaluated on the same
   held-out batches.
2. The PyTorch side is `ElectraForMaskedLM` (generator) + `ElectraForPreTraining`
   (discriminator) sharing one embedding module, the output layer tied to it, as the official
   code. Its initial weights are ours, copied through the interop name table. It runs in a
   process of its own that never imports TensorFlow (`common.TorchPeer`): the batches and
   weights travel to it as numpy arrays.
3. First step, dropout off, the discriminator fed OUR replacement samples: the MLM loss, RTD
   loss and gradient norm must agree within 1e-4.
4. Learning curves with dropout on, each sampling its own replacements (Gumbel-max on their own
   random streams; the objective is the same): masked-LM accuracy, discriminator AUC and loss
   on the held-out batches at the listed steps. AdamW (no decay on LayerNorm and biases,
   epsilon 1e-6, bias correction on both sides), global-norm clipping 1.0, linear warmup times
   linear decay to 0 (the official schedule).
5. `--save DIR`: both trained pairs become model_dirs (DIR/electra_tf, DIR/transformers) by one
   route, a `save_pretrained` folder then the HuggingFace importer, so the fine-tuning CLI can
   compare what each implementation's pre-training is worth downstream.
Prints a table; docs/results.md, "Does it learn as the reference does?", shows one.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from common import KEYS, TorchPeer, reference_state_dicts


def dump_batches(config, tokenizer, data_dir, count, seed):
    from electra_tf.pretraining.input_pipeline import pretraining_dataset

    dataset = pretraining_dataset(data_dir, config, tokenizer, config.run.train_batch_size, seed=seed).take(count)
    return [{key: batch[key].numpy() for key in KEYS} for batch in dataset]


def first_step_parity(pretrainer, reference, batch, seed):
    import tensorflow as tf

    tf_batch = {key: tf.constant(value) for key, value in batch.items()}
    with tf.GradientTape() as tape:
        outputs = pretrainer.compute_pretraining_outputs(tf_batch, tf.constant(seed, tf.int64), training=False)
    gradients = tape.gradient(outputs["loss"], pretrainer.trainable_variables)
    ours = {"mlm loss": float(outputs["masked_lm_loss"]), "rtd loss": float(outputs["disc_loss"]),
            "gradient norm": float(tf.linalg.global_norm([tf.convert_to_tensor(g) for g in gradients
                                                          if g is not None]))}
    return ours, reference.first_step(batch, outputs["sampled_ids"].numpy())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="electra_tiny")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--eval_at", default="0,250,500,1000,2000")
    parser.add_argument("--eval_batches", type=int, default=20)
    parser.add_argument("--skip_training", action="store_true", help="first-step parity only")
    parser.add_argument("--save", metavar="DIR", help="after training, write both pre-trained models as model_dirs "
                        "DIR/electra_tf and DIR/transformers (each through a HuggingFace folder and "
                        "`electra_tf.convert`), to fine-tune them the same way")
    args = parser.parse_args(argv)
    import importlib.util

    if not (importlib.util.find_spec("torch") and importlib.util.find_spec("transformers")):
        print("error: needs torch and transformers: pip install -e \".[reference]\"", file=sys.stderr)
        return 2

    import keras
    import tensorflow as tf

    from electra_tf.pretraining.config import PretrainingConfig
    from electra_tf.data.builder import BuildRunner, ShardSpec, build_shards
    from electra_tf.data.tokenization import ElectraTokenizer
    from electra_tf.pretraining.pretrainer import pretraining_optimizer
    from electra_tf.pretraining.pretrainer import ElectraPretrainer
    from electra_tf.utils.run_dir import bundled_data_dir

    config = PretrainingConfig.load(args.config).with_overrides(args.set)
    unsupported = {"objective": "electra", "disallow_correct": False, "untied_generator_embeddings": False}
    for key, supported in unsupported.items():
        if config.flat()[key] != supported:
            raise SystemExit(f"error: --set {key}={config.flat()[key]}: the reference side here implements only "
                             f"{key}={supported}; the comparison would not be like for like.")
    config = config.replace(num_train_steps=args.steps, num_warmup_steps=min(config.optimizer.num_warmup_steps, args.steps // 10))
    data_dir = bundled_data_dir(config.run.max_seq_length)
    if not (data_dir / "metadata.json").is_file():
        build_shards(data_dir, spec=ShardSpec(config.run.max_seq_length), runner=BuildRunner(num_workers=2), overwrite=True)
    tokenizer = ElectraTokenizer(data_dir / "vocab.txt")
    config = config.replace(vocab_size=tokenizer.vocabulary_size)
    print(f"config {args.config} {' '.join(args.set)}: {args.steps} steps of {config.run.train_batch_size} x "
          f"{config.run.max_seq_length}", flush=True)
    train = dump_batches(config, tokenizer, data_dir, args.steps, config.run.seed)
    held_out = dump_batches(config, tokenizer, data_dir, args.eval_batches, config.run.seed + 1)

    keras.utils.set_random_seed(config.run.seed)
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    pretrainer.compile(optimizer=pretraining_optimizer(config))
    pretrainer.compute_pretraining_outputs({k: tf.constant(v) for k, v in train[0].items()},
                                           tf.constant([0, 0], tf.int64))
    reference = TorchPeer(config, reference_state_dicts(config, {v.path: v.numpy() for v in pretrainer.variables}),
                          config.run.seed)

    ours, theirs = first_step_parity(pretrainer, reference, train[0], [config.run.seed, 1])
    print("\nFirst step, dropout off, the same replacement samples:")
    print(f"{'':16}{'electra_tf':>14}{'transformers':>14}{'difference':>12}")
    for key in ours:
        print(f"{key:16}{ours[key]:14.6f}{theirs[key]:14.6f}{abs(ours[key] - theirs[key]):12.2e}")
    worst = max(abs(ours[k] - theirs[k]) for k in ours)
    print(f"largest difference {worst:.2e} ({'within' if worst <= 1e-4 else 'OUTSIDE'} 1e-4)", flush=True)
    if args.skip_training:
        reference.close()
        return 0 if worst <= 1e-4 else 1

    eval_at = sorted({int(s) for s in args.eval_at.split(",") if int(s) <= args.steps})
    held_out_tf = tf.data.Dataset.from_tensor_slices({k: np.stack([b[k] for b in held_out]) for k in KEYS})
    train_tf = tf.data.Dataset.from_tensor_slices({k: np.stack([b[k] for b in train]) for k in KEYS})
    rows, done, started = [], 0, time.monotonic()
    for target in eval_at:
        if target > done:
            pretrainer.fit(train_tf.skip(done).take(target - done), epochs=1, verbose=0)
            reference.train(train[done:target])
            done = target
        ours_eval = pretrainer.evaluate(held_out_tf, return_dict=True, verbose=0)
        theirs_eval = reference.evaluate(held_out)
        rows.append((target, ours_eval, theirs_eval))
        print(f"step {target}: ours MLM acc {ours_eval['masked_lm_accuracy']:.3f} AUC {ours_eval['disc_auc']:.3f} "
              f"loss {ours_eval['disc_loss']:.4f} | transformers MLM acc {theirs_eval['masked_lm_accuracy']:.3f} "
              f"AUC {theirs_eval['disc_auc']:.3f} loss {theirs_eval['disc_loss']:.4f} "
              f"({(time.monotonic() - started) / 60:.1f} min)", flush=True)
    print("\n| step | MLM accuracy (ours / transformers) | disc AUC (ours / transformers) | disc loss (ours / transformers) |")
    print("|---|---|---|---|")
    for step, a, b in rows:
        print(f"| {step} | {a['masked_lm_accuracy']:.3f} / {b['masked_lm_accuracy']:.3f} | "
              f"{a['disc_auc']:.3f} / {b['disc_auc']:.3f} | {a['disc_loss']:.4f} / {b['disc_loss']:.4f} |")
    if args.save:
        for folder in save_model_dirs(Path(args.save), config, pretrainer, reference, tokenizer):
            print(f"wrote {folder}")
    reference.close()
    return 0


def save_model_dirs(output: Path, config, pretrainer, reference, tokenizer) -> list[Path]:
    """Both trained pairs as model_dirs, by the same route: a `save_pretrained` folder each side
    (ours written by the exporter, theirs by transformers itself), then the HuggingFace importer.
    A difference in fine-tuning can then only come from the weights."""
    from electra_tf.interop.convert import import_huggingface, write_huggingface_folders
    from electra_tf.interop.huggingface import write_tokenizer_files
    from electra_tf.models.weight_names import DISCRIMINATOR, GENERATOR

    folders = {name: output / "huggingface" / name for name in ("electra_tf", "transformers")}
    for folder in folders.values():
        shutil.rmtree(folder, ignore_errors=True)
    write_huggingface_folders(pretrainer, config, tokenizer, folders["electra_tf"])
    reference.save({"discriminator": str(folders["transformers"] / DISCRIMINATOR),
                    "generator": str(folders["transformers"] / GENERATOR)})
    for model in (DISCRIMINATOR, GENERATOR):
        write_tokenizer_files(folders["transformers"] / model, tokenizer, config.model.max_position_embeddings)
    return [import_huggingface(folder / DISCRIMINATOR, output / name, generator=folder / GENERATOR,
                               max_seq_length=config.run.max_seq_length, overwrite=True).path
            for name, folder in folders.items()]


if __name__ == "__main__":
    sys.exit(main())
