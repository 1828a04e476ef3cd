#!/usr/bin/env bash
# The GPU issue's checks on a GPU host, sized for one 10-minute command:
#
#   bash benchmarks/gpu_checks.sh all          # matrix, then first_step (about 9 minutes)
#   bash benchmarks/gpu_checks.sh next         # what no GPU session has measured yet, in one command (about
#                                              # 8 minutes): `loop`, then `commands`
#   bash benchmarks/gpu_checks.sh float16_run  # ELECTRA-Small pre-training in float16 through the package (its
#                                              # Triton note, its skipped steps; about 3 minutes)
#   bash benchmarks/gpu_checks.sh legacy_load  # the rerun's load of the cached program in XLA's legacy form, without
#                                              # the compiled thunks the package keeps (the flag =false): a fresh
#                                              # process and its rerun over their own cache (about 3 minutes)
#   bash benchmarks/gpu_checks.sh host_share   # the step's host work alone (ELECTRA-Small's layout at widths of 16),
#                                              # whether a host batch serializes launch and step, and whether a
#                                              # new batch buffer each step costs a CUDA-graph update (about 1 minute)
#   bash benchmarks/gpu_checks.sh loop         # --steps_per_loop: ELECTRA-Small runs of 400 steps at 1 and at 50 steps
#                                              # a call (does the GPU stop waiting for the host? about 5 minutes)
#   bash benchmarks/gpu_checks.sh graphs       # XLA's command buffers (CUDA graphs): the step with them off, and a
#                                              # profile that keeps them (the profiler otherwise replays them kernel
#                                              # by kernel), each a fresh process over its own cache, the second
#                                              # with XLA's autotuning and kernel caches warm (about 5 minutes)
#   bash benchmarks/gpu_checks.sh flags        # first_step.py for two flag sets that cut the fresh compile
#                                              # (Triton GEMMs off; and autotuning off too), fresh and rerun,
#                                              # with the step time each costs (about 5 minutes; `next` has the
#                                              # default set's figures on the same machine)
#   bash benchmarks/gpu_checks.sh matrix       # `--check`, then every runtime cell of both commands
#                                              # (runtime_matrix.py --jobs 8) beside the main job
#   bash benchmarks/gpu_checks.sh first_step   # ELECTRA-Small 128 x 128 in $PRECISION (default mixed_bfloat16,
#                                              # what `auto` picks on compute capability >= 8.0): a fresh process
#                                              # (empty compile cache) beside transformers' PyTorch, then a rerun
#                                              # and a profile of 5 of its steps (needs CUPTI, libcupti.so.12);
#                                              # with ELECTRA_TF_LOOP_LAYERS=1, the layers as one XLA loop
#   bash benchmarks/gpu_checks.sh float16      # where ELECTRA-Small's float16 gradients overflow (float16_overflow.py;
#                                              # with XLA, XLA_FLAGS=--xla_gpu_enable_triton_gemm=false is the fix)
#   bash benchmarks/gpu_checks.sh gradients    # the compiled step's gradients with Triton's GEMMs on and off, bfloat16
#                                              # and float16 (xla_gradients.py: is a GEMM kernel wrong without overflowing?)
#   bash benchmarks/gpu_checks.sh baseline     # first_step.py with XLA's own one-core compile (minutes)
#   bash benchmarks/gpu_checks.sh checkpoints  # the tiny preset, 1,000 steps in the defaults' layout: the windows
#                                              # holding a save against the others (window_rates.py; about 2 minutes)
#   bash benchmarks/gpu_checks.sh commands     # the package's command, defaults and MirroredStrategy + float16: a fresh
#                                              # run and its extension each (loads the cached step; about 3 minutes)
#   bash benchmarks/gpu_checks.sh build        # building ELECTRA-Small's networks with their initializers and from
#                                              # zeros, two rounds alternating (what a rerun, whose checkpoint
#                                              # overwrites every weight, could skip; about 1 minute)
#
# Outputs go to $OUT (or runs/gpu_checks): each part's log, and the runs' metrics and logs as one archive.
# The bundled sample's shards must exist (runs/data/wiki_sample_seq128: `python -m electra_tf.pretrain --steps 1`
# builds them where the corpus reader's packages are installed), and the matrix's sentence task
# (runs/gpu_matrix/order_task: runtime_matrix.py writes it on its first run). Every step has its own `timeout`
# (MATRIX_SECONDS, 240 by default, bounds the matrix and the main job beside it; a cut matrix keeps the cells
# it finished and a rerun continues it), so a slow compile costs its step, not the rest.
# What was measured, and how it reads: docs/results.md.
set -u
part=${1:?"which part: one of those listed at the top of this script"}
out=${OUT:-runs/gpu_checks}
mkdir -p "$out"
py=${PYTHON:-python3}
# float16 made no update for ELECTRA-Small on one H200 (every step skipped: see the float16 part), so
# its step times are not a training step's; bfloat16 is what `auto` picks there.
precision=${PRECISION:-mixed_bfloat16}
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-1}
echo "== $part, $(date -u +%FT%TZ), $(nproc) cores; XLA_FLAGS=${XLA_FLAGS:-}; PRECISION=$precision"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1

matrix() {
  # --check compiles a matmul with XLA on the GPU with the package's flags: if that fails, the parallel
  # compile (runtime.use_parallel_gpu_compile) is the suspect, and the rest runs with XLA's own.
  if ! $py -m electra_tf --check 2>&1 | tee "$out/check.txt" || grep -q "FAIL" "$out/check.txt"; then
    echo "--check failed: the rest runs with --xla_gpu_enable_llvm_module_compilation_parallelism=false"
    export XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_llvm_module_compilation_parallelism=false"
  fi
  local seconds=${MATRIX_SECONDS:-240}
  # Several processes share the GPU: without this the first to start takes nearly all its memory and
  # the others fail at once ("cudaSetDevice() on GPU:0 failed. Status: out of memory", seen on one H200).
  export TF_FORCE_GPU_ALLOW_GROWTH=true
  # The main job with its defaults (2,000 tiny steps) beside the matrix: does it end at step 2,000?
  ( timeout "$seconds" $py -m electra_tf.pretrain --model_dir runs/gpu_main > "$out/main_job.txt" 2>&1
    echo "main job exit $?" >> "$out/main_job.txt" ) &
  timeout "$seconds" $py benchmarks/runtime_matrix.py --output runs/gpu_matrix --jobs "${JOBS:-8}" --steps 12 \
    --timeout "$seconds" 2>&1 | tee "$out/matrix.txt"
  wait
  tar czf "$out/runs.tgz" runs/gpu_matrix/*.json runs/gpu_matrix/*/log.txt runs/gpu_matrix/*/cell.json \
    runs/gpu_main/metrics.json runs/gpu_main/logs 2>/dev/null
}

# One pretrain_step.py process for ELECTRA-Small at 128 x 128 over the compile cache $2, NAME ($1) its files:
# the results to the terminal and $out/NAME.txt as they are printed (unbuffered: a timeout keeps what came before
# it), TensorFlow's log of the first call's parts to $out/NAME_tf_log.txt, timed by compile_stages.py.
# VMODULE_MORE adds modules to TensorFlow's log (command_buffer_thunk=3: how the command buffers ran, which
# compile_stages.py sums up; a line or two per graph launch, a few per step, so kept out of the fresh process,
# whose step time is the one compared across sessions).
logged_step_run() {
  local name=$1 cache=$2 seconds=$3; shift 3
  ELECTRA_TF_COMPILE_CACHE=$cache PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=0 \
    TF_CPP_VMODULE=xla_compiler=1,device_compiler=1,device_executable_persistor=1${VMODULE_MORE:+,$VMODULE_MORE} \
    timeout "$seconds" $py benchmarks/pretrain_step.py --sizes small --batch 128 --precisions "$precision" \
    --xla on --steps 30 --warmup 5 "$@" 2> "$out/${name}_tf_log.txt" | tee "$out/$name.txt"
  grep -v '^[IW][0-9]' "$out/${name}_tf_log.txt" | tail -20
  $py benchmarks/compile_stages.py "$out/${name}_tf_log.txt" ${VMODULE_MORE:+--command_buffers} | tee -a "$out/$name.txt"
  echo "cache after the $name process: $(find "$cache" -type f | wc -l) file(s)"
}

first_step() {
  # transformers' PyTorch ELECTRA runs in an interpreter with torch, without this environment's TensorFlow
  # paths (PEER_PYTHON; by default python3 with PYTHONPATH and LD_LIBRARY_PATH unset).
  local peer=${PEER_PYTHON:-/tmp/peer-python} cache=/tmp/gpu_checks_cache
  if [ -z "${PEER_PYTHON:-}" ]; then
    printf '#!/bin/sh\nexec env -u PYTHONPATH -u LD_LIBRARY_PATH python3 "$@"\n' > "$peer" && chmod +x "$peer"
  fi
  rm -rf "$cache"
  # Fresh: an empty compile cache, so the first step compiles; the peer and the matmul peaks in the same process.
  logged_step_run fresh "$cache" "${FRESH_SECONDS:-300}" --peer --peer_python "$peer"
  # Rerun: the same command's step, loaded from the cache; then 5 more steps under the profiler: where the
  # GPU's time goes (kernels, idle gaps, time by kind: step_profile.kernel_summary), toward the 3x goal.
  # With command_buffer_thunk's log: are the loaded program's CUDA graphs launched, and recorded again each step?
  VMODULE_MORE=command_buffer_thunk=3 logged_step_run rerun "$cache" 150 --profile 5
}

legacy_load() {
  # A rerun's first call spent 7.7-8.25 s loading the cached program when XLA wrote it in its legacy form (the
  # optimized HLO and the compiled binary; a load emits the program's thunks from the HLO again), 1.56 s with
  # --xla_gpu_experimental_aot_compiled_thunks=true (one H200, 2026-11-28). The package sets that flag with its compile
  # cache since (runtime.use_compiled_thunks), so first_step runs with it; this part writes and loads the legacy form
  # (the flag =false) for the comparison. The flag is read when the program is written: a fresh process over an
  # empty cache of its own, then its rerun.
  local cache=/tmp/gpu_checks_cache_legacy_load flags="${XLA_FLAGS:-} --xla_gpu_experimental_aot_compiled_thunks=false"
  rm -rf "$cache"
  XLA_FLAGS="$flags" logged_step_run legacy_load_fresh "$cache" "${FRESH_SECONDS:-300}"
  XLA_FLAGS="$flags" logged_step_run legacy_load_rerun "$cache" 150
}

graphs() {
  # XLA records runs of kernels into CUDA graphs by default (TensorFlow 2.21's too: its dumped debug options; the
  # whole step is one graph when jaxlib compiles it without a GPU) and replays them kernel by kernel while a
  # profiler is on: the profiles' gaps between kernels are that mode's. XLA_FLAGS are not part of the
  # compile cache's key (and the graphs are formed when compiling), so each setting compiles in a fresh process
  # over its own cache. (1) The step without command buffers, against first_step's fresh process; (2) a profile
  # that keeps them (XLA calls it experimental: CUPTI and CUDA graphs once corrupted memory).
  # Both compiles also keep XLA's per-fusion autotuning results and compiled kernels in caches of their own
  # (fusions and their kernels do not depend on the command buffers), so the second compile, of a program the
  # compile cache does not hold, shows what those caches save: a new batch size's or another run's step whose
  # fusions were compiled before (against (1)'s compile, which filled them, and first_step's, without them).
  local base=${XLA_FLAGS:-} tuned=/tmp/gpu_checks_xla_caches
  rm -rf /tmp/gpu_checks_cache_no_graphs /tmp/gpu_checks_cache_graphs_profiled "$tuned"
  mkdir -p "$tuned/autotune"
  base="$base --xla_gpu_per_fusion_autotune_cache_dir=$tuned/autotune --xla_gpu_kernel_cache_file=$tuned/kernels"
  XLA_FLAGS="$base --xla_gpu_enable_command_buffer=" \
    logged_step_run no_command_buffers /tmp/gpu_checks_cache_no_graphs "${FRESH_SECONDS:-300}"
  echo "XLA's caches after the first compile: $(find "$tuned/autotune" -type f | wc -l) autotuning result(s), " \
    "kernel cache $(du -k "$tuned/kernels" 2>/dev/null | cut -f1) KiB"
  XLA_FLAGS="$base --xla_enable_command_buffers_during_profiling=true" VMODULE_MORE=command_buffer_thunk=3 \
    logged_step_run graphs_profiled /tmp/gpu_checks_cache_graphs_profiled "${FRESH_SECONDS:-300}" --profile 5
}

float16() {
  # XLA off first (seconds): if the overflow shows there, the compiled run is not needed to find it.
  local xla seconds
  for xla in ${FLOAT16_XLA:-off on}; do
    seconds=400; [ "$xla" = off ] && seconds=120
    timeout "$seconds" $py benchmarks/float16_overflow.py --xla "$xla" 2>&1 | tee -a "$out/float16.txt"
  done
}

gradients() {
  local precision
  for precision in mixed_bfloat16 mixed_float16; do
    timeout 300 $py benchmarks/xla_gradients.py --precision "$precision" 2>&1 | grep -v '^[IW][0-9]' | tee -a "$out/gradients.txt"
  done
}

host_share() {
  # ELECTRA-Small's variables and ops at widths of 16 (next to no GPU work): the step's time is the host's, and the
  # direct calls say whether a batch from host memory holds each launch until the previous step has run, and (the
  # two device rows: batches taken in turn against one reused) whether XLA records its CUDA graphs again when the
  # batch's buffers move (docs/results.md, "The host's share of a step", "The gradient clipped as one vector").
  # 2 CPU cores: 7-13 ms a step; one GPU host: to measure.
  timeout 240 $py benchmarks/pretrain_step.py --sizes small_layout --precisions "$precision" --xla on --steps 200 \
    --warmup 10 2>&1 | grep -v '^[IWE][0-9]' | tee "$out/host_share.txt"
}

loop() {
  # --steps_per_loop (docs/pretraining.md): Keras' fit reads each call's logs before the next call, so with one
  # step a call a GPU waits for the host's launch of every step. ELECTRA-Small on the bundled sample (its batch of
  # 128 x 128), 400 steps at 1 and at 50 steps a call, one process each over the run's compile cache (the second
  # loads the step the first compiled: the same program); their metrics.json's step_seconds compare.
  local k
  for k in 1 50; do
    rm -rf "runs/gpu_loop_$k"
    timeout "${LOOP_SECONDS:-270}" $py -m electra_tf.pretrain --config electra_small --steps 400 --steps_per_loop "$k" \
      --log_every 100 --checkpoint_every 1000 --sample_every 1000 --eval_batches 2 --model_dir "runs/gpu_loop_$k" 2>&1 \
      | grep -v '^[IW][0-9]' | tee "$out/loop_$k.txt"
    cp "runs/gpu_loop_$k/metrics.json" "$out/loop_${k}_metrics.json"
  done
}

commands() {
  # The package's own command with its defaults (one device, mixed_bfloat16, XLA) and with MirroredStrategy + float16,
  # each a fresh run over an empty compile cache, then its extension, which loads the step's program (with XLA's
  # compiled thunks: runtime.use_compiled_thunks) and its trace: their metrics.json's first_step_seconds and
  # compile_cache. Tiny preset; about 3 minutes (one H200 took over 45 s for the fresh run's first step).
  local cache=/tmp/gpu_checks_cache_commands
  rm -rf "$cache" runs/gpu_commands_*
  command_run() {
    local dir=$1 seconds=$2; shift 2
    ELECTRA_TF_COMPILE_CACHE=$cache timeout "$seconds" $py -m electra_tf.pretrain --model_dir "$dir" --log_every 20 --checkpoint_every 1000 \
      --sample_every 1000 --eval_batches 2 "$@" 2>&1 | grep -v '^[IWE][0-9]' | tee -a "$out/commands.txt"
    grep -E '"(step|skipped_steps|first_step_seconds|step_seconds|programs_added|loaded|saved)"' "$dir/metrics.json" \
      2>&1 | tr -s ' \n' ' ' | tee -a "$out/commands.txt"; echo
    cp "$dir/metrics.json" "$out/$(basename "$dir")_$(date +%s)_metrics.json" 2>/dev/null  # its pauses too
  }
  command_run runs/gpu_commands_defaults 120 --steps 40
  command_run runs/gpu_commands_defaults 60 --steps 80
  command_run runs/gpu_commands_mirrored 120 --strategy mirrored --mixed_precision mixed_float16 --steps 40
  command_run runs/gpu_commands_mirrored 60 --strategy mirrored --mixed_precision mixed_float16 --steps 80
}

checkpoints() {
  # The defaults' layout (a line every 50 steps, a save and a sample panel every 200), 1,000 tiny steps: on one
  # H200 each save paused 0.17-0.33 s against a 4 ms step (10,000-record shuffle buffer; 1,000 since). Then the
  # windows holding a save as shares of the others' median (window_rates.py), and the run's own pause counts.
  rm -rf runs/gpu_checkpoints
  timeout 300 $py -m electra_tf.pretrain --model_dir runs/gpu_checkpoints --steps 1000 --checkpoint_every 200 \
    --log_every 50 2>&1 | tee "$out/checkpoints.txt"
  cp runs/gpu_checkpoints/metrics.json "$out/checkpoints_metrics.json"
  $py benchmarks/window_rates.py "$out/checkpoints.txt" --checkpoint_every 200 \
    --metrics runs/gpu_checkpoints/metrics.json 2>&1 | tee -a "$out/checkpoints.txt"
}

case $part in
all) matrix; first_step ;;
matrix) matrix ;;
first_step) first_step ;;
graphs) graphs ;;
legacy_load) legacy_load ;;
host_share) host_share ;;
loop) loop ;;
float16) float16 ;;
gradients) gradients ;;
next)
  # Measured on one H200 (2026-11-26): the matrix (all 24 cells), float16 without XLA (as on CPU), and in a third
  # session first_step, checkpoints and one set of `flags`; in a fourth (2026-11-27) first_step with the first
  # call's split (fresh 110.9 s, rerun 24.0 s, 27.5 ms/step) and float16 with XLA, whose overflow was XLA's Triton
  # GEMMs; in a fifth (2026-11-28) first_step with fewer kernels, less host work and the kept trace (18.4 ms/step,
  # 12.7 ms called directly, 4.79x PyTorch; rerun 19.6 s), and with compiled thunks (the rerun 11.1 s; the
  # package's default since, so that part is now `legacy_load`, the flag off); in a sixth, on one H100 (2026-11-28),
  # first_step (20.9 ms/step, 3.92x PyTorch, rerun 10.9 s) and the defaults pair of `commands` (docs/results.md).
  # Next: `loop`, --steps_per_loop at 1 and 50 (the step's 6-7 ms between the benchmark's loop and the direct call
  # is the host waiting on each step's results; does K = 50 close it?), then `commands` (its MirroredStrategy +
  # float16 pair has not run).
  LOOP_SECONDS=${LOOP_SECONDS:-200} loop
  commands ;;
float16_run)
  timeout "${FLOAT16_RUN_SECONDS:-240}" $py -m electra_tf.pretrain --config electra_small --mixed_precision mixed_float16 \
    --steps 200 --log_every 50 --model_dir runs/gpu_float16 2>&1 | grep -v '^[IW][0-9]' | tee "$out/float16_run.txt" ;;
flags)
  timeout 560 $py benchmarks/first_step.py --size small --batch 128 --precision "$precision" --steps 20 \
    --warmup 5 --flag_set="--xla_gpu_enable_triton_gemm=false" \
    --flag_set="--xla_gpu_enable_triton_gemm=false --xla_gpu_autotune_level=0" --timeout 260 \
    --output "$out/flags.json" 2>&1 | tee "$out/flags.txt"
  ;;
baseline)
  timeout 560 $py benchmarks/first_step.py --size small --batch 128 --precision "$precision" --steps 30 \
    --warmup 5 --flag_set="--xla_gpu_enable_llvm_module_compilation_parallelism=false" \
    --output "$out/baseline.json" --timeout 520 2>&1 | tee "$out/baseline.txt"
  ;;
checkpoints) checkpoints ;;
commands) commands ;;
build)
  # The H200's rerun spent 5.5 s building the networks (2.2-2.8 s on 2 CPU cores with the imports of the models and
  # keras-hub, which startup.py now times apart; 0.45 s of it the initializers' random draws);
  # a rerun's checkpoint overwrites them. How much on a GPU, and is the rest the eager ops on the device?
  for round in 1 2; do
    for init in as_configured zeros; do
      timeout 120 $py benchmarks/startup.py --build_only --initializers "$init" --precision "$precision" 2>&1 \
        | grep -v '^[IW][0-9]' | tee -a "$out/build.txt"
    done
  done
  timeout 120 $py benchmarks/startup.py --build_only --profile_build 20 --precision "$precision" 2>&1 \
    | grep -v '^[IW][0-9]' | tee -a "$out/build.txt" ;;
*)
  echo "unknown part $part: see the list at the top of this script" >&2; exit 2 ;;
esac
