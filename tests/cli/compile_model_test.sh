#!/usr/bin/env bash
# End-to-end checks of sparsecc compile-model and embed on fixtures written by make_model_fixtures:
# every layer of the .npz / .safetensors / .onnx model compiled, listed in the manifest and verified
# (plan interpreter without a GPU), skipped tensors named with their reason, and bad models rejected
# with exit status 2 and no output folder left behind.
#   compile_model_test.sh PATH/TO/sparsecc PATH/TO/make_model_fixtures
set -uo pipefail
bin=$1
fixtures=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"

"$fixtures" "$tmp/in" || { echo "FAIL: make_model_fixtures"; exit 1; }

formats=(npz safetensors)
[[ -f "$tmp/in/model.onnx" ]] && formats+=(onnx)
for f in "${formats[@]}"; do
  out="$tmp/out_$f"
  expect 0 "wrote 2 bundle" -- compile-model "$tmp/in/model.$f" --n 8 --jobs 2 -o "$out"
  [[ -f "$out/manifest.json" ]] || fail "$f: no manifest.json"
  layers=$(grep -c '"fingerprint"' "$out/manifest.json")
  [[ $layers -eq 2 ]] || fail "$f: manifest lists $layers layers, want 2"
  for b in "$out"/*.sccb; do
    expect 0 "plan interpreter.* ok$" -- verify --cpu "$b"
  done
done
# What each format implies: npz pairs fc1.bias and skips the dense and 1-D tensors; ONNX transposes
# MatMul's weight, fuses the Relu and takes Gemm's C as the bias.
expect 0 "skipped proj.weight: density 1 above 0.5" -- compile-model "$tmp/in/model.npz" --n 8 -o "$tmp/out_npz"
grep -q '"bias": true' "$tmp/out_npz/manifest.json" || fail "npz: fc1.bias not used"
if [[ -f "$tmp/in/model.onnx" ]]; then
  grep -q '"layout": "transposed"' "$tmp/out_onnx/manifest.json" || fail "onnx: MatMul weight not transposed"
  grep -q '"relu": true' "$tmp/out_onnx/manifest.json" || fail "onnx: Relu not fused"
  expect 0 "skipped scale" -- compile-model "$tmp/in/model.onnx" --n 8 -o "$tmp/out_onnx"
fi

# --select, run-time N, and the embed of the manifest.
expect 0 "wrote 1 bundle" -- compile-model "$tmp/in/model.npz" --select '^fc2' -o "$tmp/sel"
grep -q '"n_mode": "runtime"' "$tmp/sel/manifest.json" || fail "select: not a run-time-N executor"
expect 0 "" -- embed --manifest "$tmp/out_npz/manifest.json" --name fixture::net -o "$tmp/net.hpp"
[[ -f "$tmp/net.hpp" && -f "$tmp/net.cpp" ]] || fail "embed: net.hpp / net.cpp not written"
grep -q "namespace fc1" "$tmp/net.hpp" || fail "embed: no fc1 in the header"

# --layer-n / --layer-n-file: a fixed N for some layers (the file's names first, then the expressions
# in order; the first that matches counts), --n or run-time N for the rest; bad rules exit 2.
layer_modes() { grep -E '"(name|n|n_mode)":' "$1" | tr -d ' \n'; }
expect 0 "N = run-time .*\(2 with their own N\)" -- compile-model "$tmp/in/model.npz" --layer-n '^fc1$=16' --layer-n 'fc=24' -o "$tmp/ln1"
m=$(layer_modes "$tmp/ln1/manifest.json")
[[ $m == *'"n":16,"n_mode":"fixed","name":"fc1"'* && $m == *'"n":24,"n_mode":"fixed","name":"fc2"'* ]] || fail "--layer-n: $m"
printf '# layer, N\nfc2,40\n\n' >"$tmp/ln.txt"
expect 0 "'nothing=5': gives no layer of .*model.npz its N" -- compile-model "$tmp/in/model.npz" --n 8 --layer-n-file "$tmp/ln.txt" --layer-n 'fc=24' --layer-n 'nothing=5' -o "$tmp/ln2"
m=$(layer_modes "$tmp/ln2/manifest.json")
[[ $m == *'"n":24,"n_mode":"fixed","name":"fc1"'* && $m == *'"n":40,"n_mode":"fixed","name":"fc2"'* ]] || fail "--layer-n-file: $m"
for b in "$tmp/ln2"/*.sccb; do
  expect 0 "plan interpreter.* ok$" -- verify --cpu "$b"
done
expect 0 '"n": 40' -- tune --model "$tmp/in/model.npz" --layer-n-file "$tmp/ln.txt" --space
expect 0 "fc2 +matrix as_stored +16x48 .* 40  .*ln.txt:2" -- compile-model "$tmp/in/model.npz" --list --layer-n-file "$tmp/ln.txt"
expect 2 "output is required" -- compile-model "$tmp/in/model.npz"
expect 2 "'fc1': expected REGEX=N" -- compile-model "$tmp/in/model.npz" --layer-n 'fc1' -o "$tmp/bad_ln"
expect 2 "'fc1=0': expected REGEX=N" -- compile-model "$tmp/in/model.npz" --layer-n 'fc1=0' -o "$tmp/bad_ln"
expect 2 "not a regular expression" -- compile-model "$tmp/in/model.npz" --layer-n '(=4' -o "$tmp/bad_ln"
printf 'fc1,8\nfc2 eight\n' >"$tmp/ln_bad.txt"
expect 2 "ln_bad.txt:2: .*expected a layer name and its N" -- compile-model "$tmp/in/model.npz" --layer-n-file "$tmp/ln_bad.txt" -o "$tmp/bad_ln"
printf 'fc1,8\nfc1,16\n' >"$tmp/ln_twice.txt"
expect 2 "ln_twice.txt:2: .*fc1 is listed twice" -- compile-model "$tmp/in/model.npz" --layer-n-file "$tmp/ln_twice.txt" -o "$tmp/bad_ln"
expect 2 "missing.txt" -- compile-model "$tmp/in/model.npz" --layer-n-file "$tmp/missing.txt" -o "$tmp/bad_ln"
[[ ! -e "$tmp/bad_ln" ]] || fail "a refused --layer-n left $tmp/bad_ln"
expect 2 "give --model" -- tune "$tmp/in/model.npz:fc1.weight" --n 8 --layer-n 'fc=4' --space

# --n-from-shapes / --batch: each layer at the N of its product in the model (ONNX shape inference;
# the fixture's input X is (batch, 64)), after the --layer-n rules and before --n.
expect 0 "shapes give 0 of 2 layer.*holds no graph" -- compile-model "$tmp/in/model.npz" --n-from-shapes --n 8 -o "$tmp/shp_npz"
if [[ -f "$tmp/in/model.onnx" ]]; then
  expect 0 "the model's shapes give 2 of 2 layer" -- compile-model "$tmp/in/model.onnx" --batch 12 -o "$tmp/shp"
  m=$(layer_modes "$tmp/shp/manifest.json")
  [[ $m == *'"n":12,"n_mode":"fixed","name":"fc1"'* && $m == *'"n":12,"n_mode":"fixed","name":"fc2"'* ]] || fail "--batch: $m"
  [[ $(grep -c '"n_from": "model shapes"' "$tmp/shp/manifest.json") -eq 2 ]] || fail "--batch: n_from"
  for b in "$tmp/shp"/*.sccb; do
    expect 0 "plan interpreter.* ok$" -- verify --cpu "$b"
  done
  expect 0 "the model's shapes give 0 of 2 layer" -- compile-model "$tmp/in/model.onnx" --n-from-shapes -o "$tmp/shp0"
  [[ $(grep -c '"n_mode": "runtime"' "$tmp/shp0/manifest.json") -eq 3 ]] || fail "--n-from-shapes, symbolic batch: not run-time N"
  expect 0 "the model's shapes give 2 of 2 layer.*\(1 taken\)" -- compile-model "$tmp/in/model.onnx" --batch 12 --layer-n 'fc2=24' -o "$tmp/shp2"
  m=$(layer_modes "$tmp/shp2/manifest.json")
  [[ $m == *'"n":12,"n_mode":"fixed","name":"fc1"'* && $m == *'"n":24,"n_mode":"fixed","name":"fc2"'* ]] || fail "--batch with --layer-n: $m"
  expect 0 '"n": 12' -- tune --model "$tmp/in/model.onnx" --batch 12 --space
  expect 0 "fc1 +matmul transposed +48x64 .* 12  model shapes" -- compile-model "$tmp/in/model.onnx" --batch 12 --list
fi

# --db --cold-l2: a cold-L2 lookup per layer, the automatic plan without a record.
expect 0 "no cold-L2 record in .*none.json .*: the automatic plan" -- compile-model "$tmp/in/model.npz" --n 8 --jobs 2 --db "$tmp/none.json" --cold-l2 -o "$tmp/cold"

# tune --model: every layer as compile-model builds it (its bias, ReLU and N), so that compile-model
# --db finds a record for each; the space without a GPU; refused combinations write no database.
expect 0 '"matrix": "fc2"' -- tune --model "$tmp/in/model.npz" --space
expect 2 "leave out --n" -- tune --model "$tmp/in/model.npz" --runtime-n --n 8 --db "$tmp/tm.json"
expect 2 "biases come from the model" -- tune --model "$tmp/in/model.npz" --n 8 --bias "$tmp/in/model.npz:fc1.bias" --db "$tmp/tm.json"
expect 2 "dense.npz: no sparse weight matrix to tune" -- tune --model "$tmp/in/dense.npz" --n 8 --db "$tmp/tm.json"
expect 2 "truncated.npz" -- tune --model "$tmp/in/truncated.npz" --n 8 --db "$tmp/tm.json"
if [[ -e /dev/nvidia0 ]]; then
  for f in "${formats[@]}"; do
    for n in 8 0; do  # fixed N, and run-time N (no --n) as compile-model builds it
      nopt=(--n "$n")
      ((n)) || nopt=()
      expect 0 "geomean over 2 matrices" -- tune --model "$tmp/in/model.$f" "${nopt[@]}" --db "$tmp/tm_$f.json" --jobs 4 --budget 60
      expect 0 "wrote 2 bundle" -- compile-model "$tmp/in/model.$f" "${nopt[@]}" --db "$tmp/tm_$f.json" -o "$tmp/tuned_$f"
      hits=$(grep -c '"plan_choice": "tuned plan' "$tmp/tuned_$f/manifest.json")
      [[ $hits -eq 2 ]] || fail "$f (n $n): $hits of 2 layers compiled from their tuning records"
      for b in "$tmp/tuned_$f"/*.sccb; do
        expect 0 "GPU .* ok$" -- verify "$b"
      done
    done
  done
  # Layers of their own N: tuned at it, found at it by compile-model with the same file.
  expect 0 "geomean over 2 matrices" -- tune --model "$tmp/in/model.npz" --n 8 --layer-n-file "$tmp/ln.txt" --db "$tmp/tm_ln.json" --jobs 4 --budget 60
  expect 0 "wrote 2 bundle" -- compile-model "$tmp/in/model.npz" --n 8 --layer-n-file "$tmp/ln.txt" --db "$tmp/tm_ln.json" -o "$tmp/tuned_ln"
  hits=$(grep -c '"plan_choice": "tuned plan' "$tmp/tuned_ln/manifest.json")
  [[ $hits -eq 2 ]] || fail "--layer-n-file: $hits of 2 layers compiled from their tuning records"
  m=$(layer_modes "$tmp/tuned_ln/manifest.json")
  [[ $m == *'"n":40,"n_mode":"fixed","name":"fc2"'* ]] || fail "--layer-n-file with --db: $m"
  for b in "$tmp/tuned_ln"/*.sccb; do
    expect 0 "GPU .* ok$" -- verify "$b"
  done
else
  expect 2 "none is usable here" -- tune --model "$tmp/in/model.npz" --n 8 --db "$tmp/tm.json"
fi
[[ -e "$tmp/tm.json" ]] && fail "a refused tune --model wrote a database"

# Bad models: exit 2, the file named, nothing left behind.
expect 2 "truncated.npz" -- compile-model "$tmp/in/truncated.npz" -o "$tmp/bad1"
[[ ! -e "$tmp/bad1" ]] || fail "truncated.npz left $tmp/bad1"
expect 2 "garbage.onnx" -- compile-model "$tmp/in/garbage.onnx" -o "$tmp/bad2"
[[ ! -e "$tmp/bad2" ]] || fail "garbage.onnx left $tmp/bad2"
expect 2 "no sparse weight" -- compile-model "$tmp/in/dense.npz" -o "$tmp/bad3"
[[ ! -e "$tmp/bad3" ]] || fail "dense.npz left $tmp/bad3"
expect 2 "missing.npz" -- compile-model "$tmp/in/missing.npz" -o "$tmp/bad4"
expect 2 "select" -- compile-model "$tmp/in/model.npz" --select '(' -o "$tmp/bad5"
# A folder compile-model did not write is never replaced; a failed run keeps the previous output.
mkdir -p "$tmp/mine" && echo keep >"$tmp/mine/notes.txt"
expect 2 "did not write" -- compile-model "$tmp/in/model.npz" -o "$tmp/mine"
[[ -f "$tmp/mine/notes.txt" ]] || fail "compile-model replaced a user folder"
before=$(cat "$tmp/out_npz/manifest.json")
expect 2 "truncated.npz" -- compile-model "$tmp/in/truncated.npz" -o "$tmp/out_npz"
[[ "$(cat "$tmp/out_npz/manifest.json")" == "$before" ]] || fail "a failed run changed the previous output"
leftovers=$(find "$tmp" -maxdepth 1 -name '.*.tmp.*' -o -maxdepth 1 -name '.*.old.*' | wc -l)
[[ $leftovers -eq 0 ]] || fail "temporary folders left behind"

# CPU executors of bf16 B and C (fp32 accumulation), where this sparsecc has the CPU backend.
if "$bin" compile-model "$tmp/in/model.npz" --n 8 --target native --dtype bf16 -o "$tmp/out_cpu_bf16" \
  >"$tmp/cpu.log" 2>&1; then
  grep -q "N = 8, bf16 (fp32 accumulation): CPU executor" "$tmp/cpu.log" || fail "cpu bf16: no bf16 executor line"
  grep -q '"dtype": "bf16"' "$tmp/out_cpu_bf16/manifest.json" || fail "cpu bf16: the manifest says another dtype"
elif ! grep -qE "without the CPU backend|neither AVX-512 nor AVX2" "$tmp/cpu.log"; then
  fail "compile-model --target native --dtype bf16: $(head -3 "$tmp/cpu.log")"
fi

if ((failures)); then
  echo "$failures compile-model check(s) failed"
  exit 1
fi
echo "all compile-model checks passed"
