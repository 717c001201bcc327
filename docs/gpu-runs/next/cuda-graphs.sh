#!/bin/bash
# Session 22's CUDA graphs on a GPU (about 4 minutes): the graph tests (a replayed model step equals
# running it; the trainer's replayed steps equal op by op, f32 and bf16), then the 85.5M model at
# micro-batch 8 in bf16 with data.document_boundaries: cross (the shapes a graph needs), its steps
# replayed (train.cuda_graphs: true) and launched op by op (false), tokens/s side by side, and the
# same at the toy width (hidden 192, where the ~600 launches of a step weigh most), and the default
# config (byte-level, width 64, data.document_boundaries: reset: session 25's padded sequence tables)
# for 300 steps both ways. In the emulation a replayed step is 6 stream operations (8 with reset's
# tables) against more than 20 times as many op by op.
# Usage: ../shared/tools/device-bundle .gpu test_cuda test_train linattn-train linattn-data,
# then run with carry [".gpu", "data/corpus"]: OUT=$OUT docs/gpu-runs/next/cuda-graphs.sh
set -u
. docs/gpu-runs/bundle-env.sh  # BIN, R, W, step
step test_cuda_graph 60 "$BIN/test_cuda" --gtest_brief=1 --gtest_filter='CudaGraph*:CudaOptimizer*'
step test_train_graph 90 "$BIN/test_train" --gtest_brief=1 --gtest_filter='CudaGraphTraining*:CudaStepSync*'
"$BIN/linattn-data" prepare data/corpus/sotu --tokenizer bytes --out data/cache/sotu-bytes > /dev/null 2>&1
M85="--set model.hidden_size=768 --set model.num_hidden_layers=12 --set model.num_heads=12 --set data.seq_len=2048 --set train.batch_size=8 --set train.precision=bf16 --set train.device=cuda --set data.document_boundaries=cross --set train.max_steps=24 --set train.log_every=8 --set train.eval_every=0"
TOY="--set model.hidden_size=192 --set model.num_hidden_layers=12 --set model.num_heads=3 --set data.seq_len=512 --set train.batch_size=8 --set train.precision=bf16 --set train.device=cuda --set data.document_boundaries=cross --set train.max_steps=200 --set train.log_every=50 --set train.eval_every=0"
DEF="--set train.device=cuda --set train.max_steps=300 --set train.log_every=100 --set train.eval_every=0 --set train.sample_every=0 --set checkpoint.every=0"
for g in true false; do
  step m85_graphs_$g 120 "$BIN/linattn-train" configs/bench.yaml $M85 --set train.cuda_graphs=$g --out "$W/m$g"
  step toy_graphs_$g 120 "$BIN/linattn-train" configs/bench.yaml $TOY --set train.cuda_graphs=$g --out "$W/t$g"
  step default_graphs_$g 90 "$BIN/linattn-train" configs/default.yaml $DEF --set train.cuda_graphs=$g --out "$W/d$g"
  rm -rf "$W/m$g" "$W/t$g" "$W/d$g"
done
grep -h "cuda graphs\|^step .*tok/s" "$R"/*graphs*.txt | tail -n 40 > "$R/graphs-summary.txt"
tar -czf "$OUT/results.tgz" -C "$R" .
