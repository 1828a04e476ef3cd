"""benchmarks/: every script's options parse, and (in `pytest -m slow`: a benchmark is a tool
run by hand) the ones that run without a GPU, torch or Beam take one tiny run and print
figures that hold together: rates positive, a rate the count over the time it says, a p50 no
slower than its p99, a projection the measured rate's. (What the figures are worth is read on
real sizes: docs/results.md names the command behind each.)"""

import csv
import re
import subprocess
import sys

import pytest

from tests.cli_runs import environment
from tests.scripts import REPO, load_script

SCRIPTS = ("build_data", "gpu", "input_pipeline", "keras_hub_parity", "litert_latency", "pretrain_step",
           "reference_parity", "scaling", "serving_latency", "transformers_step")


def benchmark(name: str, *args: str, timeout: int = 600) -> str:
    """`python benchmarks/<name>.py ARGS` as a user runs it; returns its output."""
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / f"{name}.py"), *args], env=environment(),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def test_the_folder_holds_these_scripts_and_their_helpers():
    names = sorted(path.stem for path in (REPO / "benchmarks").glob("*.py"))
    assert names == sorted([*SCRIPTS, "common", "serving_runtimes"])


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_parses_its_options(name):
    assert "usage:" in benchmark(name, "--help", timeout=120)


@pytest.mark.slow  # a benchmark's run; the default suite parses every script's options
def test_the_step_prints_its_row_against_the_peak():
    printed = benchmark("pretrain_step", "--sizes", "tiny", "--precisions", "float32", "--xla", "off",
                        "--steps", "2", "--rounds", "1", "--accumulation", "2")
    row = next(line for line in printed.splitlines() if line.startswith("| electra_tf | tiny | float32 | off |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[4] == "32 x 128" and cells[5] == "2"  # the update's batch as two micro-batches
    step_ms, tokens_per_s, gflops, peak = (float(cells[i].replace(",", "")) for i in (7, 8, 9, 10))
    assert step_ms > 0 and peak > 0 and float(cells[6]) > 0  # the first step, the step, the peak beside it
    assert tokens_per_s == pytest.approx(32 * 128 / (step_ms / 1000), rel=0.01)  # the tokens of a step over its time
    assert float(cells[11].rstrip("%")) == pytest.approx(100 * gflops / peak, rel=0.05)  # one round: its share
    assert cells[12] == "-" and cells[13] == "-"  # no peer asked for; no GPU


def input_pipeline_rates(data_dir, small_vocab) -> dict:
    printed = benchmark("input_pipeline", "--data_dir", str(data_dir), "--vocab", str(small_vocab), "--feed_only",
                        "--feed_steps", "40")
    rates = {name: float(value.replace(",", "")) for name, value in re.findall(
        r"^  (tf.data pipeline alone|ResumableInput \+ distribution \+ fit loop alone|the whole path that feeds fit)"
        r"[^:]*:\s+([\d,.]+) batches/s", printed, re.M)}
    assert len(rates) == 3 and all(rate > 0 for rate in rates.values()), printed
    return rates


@pytest.mark.slow  # a benchmark's run; the default suite parses every script's options
def test_the_input_pipeline_prints_what_feeds_fit(data_dir, small_vocab):
    input_pipeline_rates(data_dir, small_vocab)


@pytest.mark.slow  # a timing comparison: kept out of the default suite, whose processes share the cores
def test_the_whole_input_path_is_no_faster_than_its_parts(data_dir, small_vocab):
    rates = input_pipeline_rates(data_dir, small_vocab)
    # 40 steps a loop, so fit's fixed cost per call does not decide the rate, and 2x slack for loops
    # timed apart; a benchmark that left a part out of the whole would run several times faster.
    assert rates["the whole path that feeds fit"] <= 2 * min(rates.values()), rates


@pytest.mark.slow  # a benchmark's run; the default suite parses every script's options
def test_serving_latency_prints_each_signature(tmp_path, small_vocab):
    from electra_tf.data.tokenization import ElectraTokenizer
    from electra_tf.models.backbone import BackboneConfig
    from electra_tf.models.encoders import build_discriminator
    from electra_tf.pretraining.config import PretrainingConfig
    from electra_tf.serving.publish import export_model

    tokenizer = ElectraTokenizer(small_vocab)
    config = PretrainingConfig.load("electra_tiny", {"num_layers": 1, "vocab_size": tokenizer.vocabulary_size,
                                                 "max_seq_length": 32})
    export = export_model(build_discriminator(config.model), tokenizer,
                                  BackboneConfig(config.model, config.run.max_seq_length), tmp_path, "tiny")
    printed = benchmark("serving_latency", "--export", str(export), "--batches", "1", "2", "--calls", "2",
                        "--warmup", "1")
    rows = [line.split() for line in printed.splitlines() if line.startswith("tiny ")]
    assert sorted((row[1], row[2]) for row in rows) == sorted(
        (signature, batch) for signature in ("serving_default", "encode_ids") for batch in ("1", "2")), printed
    for _, _, batch, p50, p99, sequences in rows:
        assert 0 < float(p50) <= float(p99) and float(sequences.replace(",", "")) > 0


@pytest.mark.slow  # a benchmark's run; the default suite parses every script's options
def test_the_keras_hub_parity_puts_the_difference_on_the_gelu_form(pretrained_run):
    printed = benchmark("keras_hub_parity", "--model_dir", str(pretrained_run), "--texts", "8")
    largest = dict(re.findall(r"^  (ours.*?)\s+max \|diff\| (\S+)", printed, flags=re.MULTILINE))
    assert set(largest) == {"ours (exact GELU)", "ours with tanh GELU"}, printed
    exact, tanh = float(largest["ours (exact GELU)"]), float(largest["ours with tanh GELU"])
    assert tanh < 2e-5 and tanh < exact, printed  # with keras-hub's GELU form, float rounding is all that is left
    assert "tokens of 8 news articles" in printed


@pytest.mark.slow  # a benchmark's run; the default suite parses every script's options
def test_data_building_prints_its_rate_and_projection(corpus, small_vocab, tmp_path):
    text = corpus.write_sentence_file(tmp_path / "corpus.txt", repeat=5)
    printed = benchmark("build_data", "--input", str(text), "--vocab", str(small_vocab), "--workers", "1",
                        "--runners", "local", "--project_to", "8")
    examples, seconds, rate = re.search(r"local  1 worker\(s\): ([\d,]+) examples in ([\d.]+) s = (\d+) examples/s",
                                        printed).groups()
    assert int(examples.replace(",", "")) > 0 and int(rate) == pytest.approx(
        int(examples.replace(",", "")) / float(seconds), rel=0.1, abs=2)
    hours = float(re.search(r"^\s+8 workers:\s+([\d.]+) h", printed, re.M).group(1))
    assert hours == pytest.approx(26e6 / (int(rate) * 8) / 3600, rel=0.2)  # the projection is the measured rate's


def test_the_gpu_scripts_fine_tuning_task_is_real_sentences_half_shuffled(tmp_path):
    gpu = load_script("gpu", "benchmarks")
    train, dev = gpu.order_task(tmp_path)
    rows = list(csv.DictReader(train.open())) + list(csv.DictReader(dev.open()))
    assert len(rows) == gpu.TRAIN_SENTENCES + gpu.EVAL_SENTENCES
    assert {row["label"] for row in rows} == {"in_order", "shuffled"}
    assert abs(sum(row["label"] == "shuffled" for row in rows) - len(rows) / 2) <= 1
    assert gpu.failure_line("I0000 00:00 x.cc:1] Error in a log line\nerror: the run failed\n") == \
        "error: the run failed"


@pytest.fixture(scope="module")
def data_dir(corpus, small_vocab, tmp_path_factory):
    return corpus.build_test_shards(tmp_path_factory.mktemp("benchmark_data"), small_vocab, 128, num_shards=1,
                                    repeat=10)
