#!/usr/bin/env bash
# End-to-end checks of the sparsecc CLI: exit statuses (0 ok, 1 failed check, 2 bad usage or input),
# error messages naming the file and the place, the JSON keys of `inspect`, and `bench` forwarding to
# the sparsecc_bench program (given as the third argument when it is built).
#   cli_test.sh PATH/TO/sparsecc FIXTURE_DIR [PATH/TO/sparsecc_bench]
set -uo pipefail
bin=$1
bench=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"

cat >"$tmp/small.mtx" <<'M'
%%MatrixMarket matrix coordinate real general
% a 3x4 matrix
3 4 4
1 1 1.5
2 3 -2
3 1 4
3 4 0.25
M
cat >"$tmp/bad.mtx" <<'M'
%%MatrixMarket matrix coordinate real general
3 4 2
1 1 1.5
2 9 -2
M
cat >"$tmp/cell.swc" <<'S'
# soma, a dendrite that branches once
1 1 0 0 0 5 -1
2 3 10 0 0 1 1
3 3 20 0 0 1 2
4 3 30 5 0 0.8 3
5 3 30 -5 0 0.8 3
S
cat >"$tmp/loop.swc" <<'S'
1 1 0 0 0 5 -1
2 3 10 0 0 1 3
3 3 20 0 0 1 2
S

expect 0 "inspect"                 -- --help
expect 0 "^sparsecc [0-9]+\.[0-9]+" -- --version
expect 2 "subcommand"              -- 
expect 2 "unknown command 'nosuch'" -- nosuch
expect 2 "--bogus"                 -- inspect --bogus "$tmp/small.mtx"
expect 2 "missing.mtx: cannot open" -- inspect "$tmp/missing.mtx"
expect 2 "bad.mtx:4: .*column"     -- inspect "$tmp/bad.mtx"
expect 2 "unknown format"          -- inspect "$tmp/cell.txt"
expect 2 "loop.swc:[0-9]+: "       -- inspect "$tmp/loop.swc"
expect 0 "3 x 4"                   -- inspect "$tmp/small.mtx"
expect 0 '"rows": 3'               -- inspect --json "$tmp/small.mtx"
expect 0 '"nnz": 4'                -- inspect --json "$tmp/small.mtx"
expect 0 '"cols": 4'               -- inspect --json "$tmp/small.mtx"
expect 0 '"branch_points": 1'      -- inspect --json "$tmp/cell.swc"
expect 0 '"compartments": 5'       -- inspect --json "$tmp/cell.swc"
expect 0 '"cells": 1'              -- inspect --json "$tmp/cell.swc"
expect 0 '"compartments": 21'      -- inspect --json --resolution 5 "$tmp/cell.swc"
expect 2 "resolution"              -- inspect --resolution 0 "$tmp/cell.swc"
gzip -c "$tmp/small.mtx" >"$tmp/small.mtx.gz"
expect 0 '"nnz": 4'                -- inspect --json "$tmp/small.mtx.gz"
head -c 20 "$tmp/small.mtx.gz" >"$tmp/trunc.mtx.gz"
expect 2 "trunc.mtx.gz.*(truncated|gzip)" -- inspect "$tmp/trunc.mtx.gz"
expect 0 '"kind":"spmm"'            -- compile "$tmp/small.mtx" --n 5 --relu --plan-json -o "$tmp/small.sccb"
expect 0 "max relative error .* ok" -- verify "$tmp/small.sccb" --cpu
expect 2 "missing.npy: cannot open" -- compile "$tmp/small.mtx" --n 5 --bias "$tmp/missing.npy" -o "$tmp/x.sccb"
expect 0 "compiled .*runtime N"    -- compile "$tmp/small.mtx" --n 7 --runtime-n --values streamed -o "$tmp/rt.sccb"
expect 0 "N=19 .* ok"              -- verify "$tmp/rt.sccb" --cpu --n 19
expect 2 "compiled for N = 5"      -- verify "$tmp/small.sccb" --cpu --n 6
expect 0 '"row_split":"clustered"' -- compile "$tmp/small.mtx" --n 5 --clustered-rows --plan-json -o "$tmp/clu.sccb"
expect 0 "max relative error .* ok" -- verify "$tmp/clu.sccb" --cpu
expect 2 "exclude each other"      -- compile "$tmp/small.mtx" --n 5 --clustered-rows --balanced -o "$tmp/x.sccb"
# Targets: --arch is checked against the table (the error names the known architectures), sm_80
# compiles for an A100, and `targets` lists the table.
expect 2 "unknown GPU architecture 'sm_91'.*sm_80, sm_86"   -- compile "$tmp/small.mtx" --n 5 --arch sm_91 -o "$tmp/x.sccb"
expect 2 "unknown GPU architecture 'sm_91'"                -- hines "$tmp/cell.swc" --arch sm_91
expect 0 '"target":"sm_80"'                                -- compile "$tmp/small.mtx" --n 5 --arch sm_80 --json -o "$tmp/a100.sccb"
expect 0 "^sm_80 +A100 SXM 40GB +8.0 +7.0 +108 "           -- targets
expect 0 '"sm_count": 132'                                 -- targets --json
expect 2 "clustered rows need an fp32 plan" -- compile "$tmp/small.mtx" --n 5 --clustered-rows --dtype f16 -o "$tmp/x.sccb"
expect 0 '"stage_min_entries":1'   -- compile "$tmp/small.mtx" --n 5 --stage-dense 1 --plan-json -o "$tmp/st.sccb"
expect 0 "max relative error .* ok" -- verify "$tmp/st.sccb" --cpu
expect 2 "staged steps need an fp32 unrolled plan" -- compile "$tmp/small.mtx" --n 5 --stage-dense 1 --values rolled -o "$tmp/x.sccb"
expect 2 "stage-dense"             -- compile "$tmp/small.mtx" --n 5 --stage-dense -1 -o "$tmp/x.sccb"
expect 0 '"programmatic":true,"programmatic_trigger":true' -- compile "$tmp/small.mtx" --n 5 --plan-json -o "$tmp/pg.sccb"
expect 0 '"programmatic":true,"programmatic_trigger":false' -- compile "$tmp/small.mtx" --n 5 --programmatic wait --plan-json -o "$tmp/pg.sccb"
expect 0 '"programmatic":false,"programmatic_trigger":false' -- compile "$tmp/small.mtx" --n 5 --programmatic off --plan-json -o "$tmp/pg.sccb"
expect 0 '"programmatic":true,"programmatic_trigger":false' -- compile "$tmp/small.mtx" --n 6 --dtype f16 --plan-json -o "$tmp/pg.sccb"
expect 2 "do not let the next grid launch early" -- compile "$tmp/small.mtx" --n 6 --programmatic trigger --dtype f16 -o "$tmp/x.sccb"
expect 2 "programmatic: early not in" -- compile "$tmp/small.mtx" --n 5 --programmatic early -o "$tmp/x.sccb"
expect 0 '"step_lanes":32'         -- compile "$tmp/small.mtx" --n 1 --values rolled --plan-json -o "$tmp/sl.sccb"
expect 0 "max relative error .* ok" -- verify "$tmp/sl.sccb" --cpu
expect 0 "rolled values \(8 step lanes of 4 columns\)" -- compile "$tmp/small.mtx" --n 3 --values rolled -o "$tmp/sl3.sccb"
expect 0 '"step_lanes":4'          -- compile "$tmp/small.mtx" --n 9 --values rolled --step-lanes 4 --plan-json -o "$tmp/sl4.sccb"
expect 0 "max relative error .* ok" -- verify "$tmp/sl4.sccb" --cpu
expect 2 "step lanes need a rolled plan" -- compile "$tmp/small.mtx" --n 1 --values baked --step-lanes 8 -o "$tmp/x.sccb"
# The compressed family: asked for, its own flags, the family line, verify through its interpreter.
expect 0 "family compressed \(asked for\): blocks of 4 warps x 1 strips" -- compile "$tmp/small.mtx" --n 16 --dtype f16 --values compressed -o "$tmp/cz.sccb"
expect 0 "max relative error .* ok" -- verify "$tmp/cz.sccb" --cpu
expect 0 "records: 0 bitmap, .* positions" -- compile "$tmp/small.mtx" --n 7 --dtype bf16 --values compressed --compressed-layout records --record-formats positions,dense --splits 1 -o "$tmp/cz2.sccb"
expect 0 "max relative error .* ok" -- verify "$tmp/cz2.sccb" --cpu
# Record formats named without a layout take records, on a layer the rule would scatter.
expect 0 "scatter layout .*2 round" -- compile "$tmp/small.mtx" --n 16 --dtype f16 --values compressed --kept-rounds 2 -o "$tmp/cz4.sccb"
expect 0 "records: .* bitmap, 0 positions" -- compile "$tmp/small.mtx" --n 16 --dtype f16 --values compressed --record-formats bitmap,dense -o "$tmp/cz5.sccb"
expect 0 "chunks of 64 columns \(4 stages\)" -- compile "$tmp/small.mtx" --n 16 --dtype f16 --values compressed --chunk-k 64 --stages 4 -o "$tmp/cz3.sccb"
expect 0 "max relative error .* ok" -- verify "$tmp/cz3.sccb" --cpu
expect 2 "compressed plans run on fp16 / bf16" -- compile "$tmp/small.mtx" --n 16 --values compressed -o "$tmp/x.sccb"
expect 2 "record-formats: 'bits' is not bitmap" -- compile "$tmp/small.mtx" --n 16 --dtype f16 --values compressed --record-formats bits -o "$tmp/x.sccb"
expect 2 "step-lanes: 3 not in"    -- compile "$tmp/small.mtx" --n 1 --values rolled --step-lanes 3 -o "$tmp/x.sccb"
head -c 100 "$tmp/small.sccb" >"$tmp/trunc.sccb"
expect 2 "trunc.sccb: byte 16: .*truncated" -- verify "$tmp/trunc.sccb"
expect 2 "nosuch.sccb: cannot open" -- verify "$tmp/nosuch.sccb"
[[ -e "$tmp/x.sccb" ]] && { echo "FAIL: a failed compile left x.sccb behind"; failures=$((failures + 1)); }
# fp16 / bf16 executors and tensor-core blocklets: a dense 16x8 block plus three scattered entries.
awk 'BEGIN { print "%%MatrixMarket matrix coordinate real general"; print "20 12 131";
             for (r = 1; r <= 16; r++) for (c = 1; c <= 8; c++) printf "%d %d %.3f\n", r, c, (r * 7 + c) % 11 / 10 + 0.05;
             print "17 9 0.5"; print "18 10 -0.25"; print "20 12 1.5" }' >"$tmp/blk.mtx"
expect 0 "blocklets 16x8 .*: 1 tiles in 1 fragments" -- compile "$tmp/blk.mtx" --n 9 --dtype f16 -o "$tmp/blk.sccb"
expect 0 "f16 \(f32 accumulation, 128 nonzeros on tensor cores\).* ok" -- verify "$tmp/blk.sccb" --cpu
expect 0 "bf16 \(bf16 accumulation\), blocklets off" -- compile "$tmp/blk.mtx" --n 9 --dtype bf16 --accumulate bf16 --blocklets off -o "$tmp/blk2.sccb"
expect 0 "bf16 \(bf16 accumulation\).* ok" -- verify "$tmp/blk2.sccb" --cpu
expect 2 "tensor-core tiles are 16x8, 16x16 or 8x8" -- compile "$tmp/blk.mtx" --n 9 --dtype f16 --blocklets 4x4 -o "$tmp/x.sccb"
expect 2 "PTX emitter writes fp32 kernels" -- compile "$tmp/blk.mtx" --n 9 --dtype f16 --emit ptx -o "$tmp/x.sccb"
expect 2 "blocklets run on fp16 / bf16" -- compile "$tmp/blk.mtx" --n 9 --blocklets 16x8 -o "$tmp/x.sccb"
[[ -e "$tmp/x.sccb" ]] && { echo "FAIL: a failed compile left x.sccb behind"; failures=$((failures + 1)); }
expect 0 "depth 0: base 5 rows"     -- hines "$tmp/cell.swc"
expect 0 "depth 1: 21 rows \(K 6:"  -- hines "$tmp/cell.swc" --resolution 5 --base-rows 2
expect 0 "depth 2: 21 rows \(K 3:"  -- hines "$tmp/cell.swc" --resolution 5 --base-rows 2 --k 3
expect 0 "depth 2: 21 rows \(K 3:"  -- hines "$tmp/cell.swc" --resolution 5 --base-rows 2 --rhs 8
expect 0 "relative error .*: ok"   -- hines "$tmp/cell.swc" --resolution 5 --base-rows 2 --check
expect 0 "relative error .*: ok"   -- hines "$tmp/cell.swc" --resolution 5 --base-rows 2 --k 3 --check
expect 0 '"kind":"hines"'           -- hines "$tmp/cell.swc" "$tmp/cell.swc" --cells 3 --minimal --depth 1 --plan-json
expect 0 "30 compartments in 6 cells" -- hines "$tmp/cell.swc" --cells 6 --rhs 4 --dtype f32 --check
expect 2 "loop.swc:[0-9]+: "       -- hines "$tmp/loop.swc"
expect 2 "missing.swc: cannot open" -- hines "$tmp/missing.swc"
expect 2 "--k"                     -- hines "$tmp/cell.swc" --k 1
expect 2 "K of large levels = 1"   -- hines "$tmp/cell.swc" --k-large 1
expect 0 '"code":"unrolled"'        -- hines "$tmp/cell.swc" --resolution 5 --base-rows 2 --plan-json
expect 0 '"code":"tables"'          -- hines "$tmp/cell.swc" --resolution 5 --base-rows 2 --code-budget 0 --plan-json
expect 2 "--code"                  -- hines "$tmp/cell.swc" --code baked
expect 2 "unrolled code needs the bases in shared memory" -- hines "$tmp/cell.swc" --resolution 500 --depth 0 --code unrolled
expect 0 "soma trace within .* of the reference ok" -- demo
expect 0 '"soma_trace_max_abs_diff_mv"' -- demo --json

# embed: bundles (and a compile-model manifest's layers) into a header and source; bad input leaves
# neither file behind and an existing pair unchanged; the same input gives the same bytes.
expect 0 "wrote $tmp/cell.sccb"    -- hines "$tmp/cell.swc" --resolution 2 -o "$tmp/cell.sccb"
mkdir -p "$tmp/gen/a" "$tmp/gen/b" "$tmp/other"
expect 0 "wrote $tmp/gen/a/kernels.hpp and $tmp/gen/a/kernels.cpp: 2 layers in namespace cli::kernels" -- \
  embed "$tmp/small.sccb" "$tmp/cell.sccb" --name cli::kernels -o "$tmp/gen/a/kernels.hpp"
expect 0 "2 layers"                -- embed "$tmp/small.sccb" "$tmp/cell.sccb" --name cli::kernels -o "$tmp/gen/b/kernels"
cmp -s "$tmp/gen/a/kernels.hpp" "$tmp/gen/b/kernels.hpp" && cmp -s "$tmp/gen/a/kernels.cpp" "$tmp/gen/b/kernels.cpp" ||
  { echo "FAIL: embed wrote different files for the same input"; failures=$((failures + 1)); }
for want in 'const sparsecc::rt::SpmmExecutor& small\(\);' 'const sparsecc::rt::HinesExecutor& cell\(\);' \
            'std::span<const double> cap_over_dt\(\);' 'inline constexpr std::size_t kLayerCount = 2;'; do
  grep -Eq "$want" "$tmp/gen/a/kernels.hpp" || { echo "FAIL: kernels.hpp lacks /$want/"; failures=$((failures + 1)); }
done
grep -q '#include "kernels.hpp"' "$tmp/gen/a/kernels.cpp" || { echo "FAIL: kernels.cpp does not include kernels.hpp"; failures=$((failures + 1)); }
printf '{"layers": [{"name": "enc.fc1", "file": "small.sccb"}, {"name": "enc.fc2", "file": "./rt.sccb"}]}\n' \
  >"$tmp/manifest.json"
expect 0 "m.cpp: 3 layers in namespace m" -- embed --manifest "$tmp/manifest.json" "$tmp/cell.sccb" --name m -o "$tmp/gen/m.hpp"
expect 0 "enc_fc2 +spmm, 3 x 4, N = 7 \(runtime\)" -- embed --manifest "$tmp/manifest.json" --name m -o "$tmp/gen/m2"
grep -q 'kName = "enc.fc1";' "$tmp/gen/m.hpp" || { echo "FAIL: m.hpp lacks the manifest's layer name"; failures=$((failures + 1)); }
cp "$tmp/small.sccb" "$tmp/other/small.sccb"
cp "$tmp/gen/a/kernels.hpp" "$tmp/keep.hpp"
cp "$tmp/gen/a/kernels.cpp" "$tmp/keep.cpp"
expect 2 "trunc.sccb: byte 16: .*truncated" -- embed "$tmp/small.sccb" "$tmp/trunc.sccb" --name k -o "$tmp/gen/a/kernels.hpp"
expect 2 "nosuch.sccb: cannot open" -- embed "$tmp/nosuch.sccb" --name k -o "$tmp/gen/a/kernels.hpp"
expect 2 "layers \"small\" and \"small\" both get the C\+\+ name 'small'" -- \
  embed "$tmp/small.sccb" "$tmp/other/small.sccb" --name k -o "$tmp/gen/a/kernels.hpp"
expect 2 "small.sccb is given twice" -- embed --manifest "$tmp/manifest.json" "$tmp/small.sccb" --name k -o "$tmp/gen/a/kernels.hpp"
expect 2 "namespace 'a b' is not valid C\+\+" -- embed "$tmp/small.sccb" --name "a b" -o "$tmp/gen/a/kernels.hpp"
expect 2 "'class' is a keyword"    -- embed "$tmp/small.sccb" --name class -o "$tmp/gen/a/kernels.hpp"
cmp -s "$tmp/keep.hpp" "$tmp/gen/a/kernels.hpp" && cmp -s "$tmp/keep.cpp" "$tmp/gen/a/kernels.cpp" ||
  { echo "FAIL: a failed embed changed an existing output"; failures=$((failures + 1)); }
expect 2 "must end in .hpp"        -- embed "$tmp/small.sccb" --name k -o "$tmp/gen/none.cpp"
expect 2 "nodir does not exist"    -- embed "$tmp/small.sccb" --name k -o "$tmp/nodir/none.hpp"
expect 2 "--name"                  -- embed "$tmp/small.sccb" -o "$tmp/gen/none.hpp"
expect 2 "give bundle files, --manifest, or both" -- embed --name k -o "$tmp/gen/none.hpp"
echo '{"layers": [' >"$tmp/bad_manifest.json"
expect 2 "bad_manifest.json: byte [0-9]+: not valid JSON" -- embed --manifest "$tmp/bad_manifest.json" --name k -o "$tmp/gen/none.hpp"
echo '{"layers": [{"name": "x"}]}' >"$tmp/bad_manifest.json"
expect 2 "bad_manifest.json: layer 0 of the manifest has no \"file\"" -- embed --manifest "$tmp/bad_manifest.json" --name k -o "$tmp/gen/none.hpp"
# A manifest's files stay inside its folder: absolute paths, '..' out of it and symbolic links out of
# it are refused, naming the layer.
mkdir -p "$tmp/mf/sub"
cp "$tmp/small.sccb" "$tmp/mf/sub/ok.sccb"
ln -s "$tmp/small.sccb" "$tmp/mf/out.sccb"
for bad in "$tmp/small.sccb" ../small.sccb sub/../../small.sccb out.sccb; do
  printf '{"layers": [{"name": "a", "file": "sub/ok.sccb"}, {"name": "evil", "file": "%s"}]}\n' "$bad" >"$tmp/mf/manifest.json"
  expect 2 "mf/manifest.json: layer 1 \('evil'\): file '.*' .*inside its folder" -- \
    embed --manifest "$tmp/mf/manifest.json" --name k -o "$tmp/gen/none.hpp"
done
printf '{"layers": [{"name": "a", "file": "sub/ok.sccb"}, {"name": "b", "file": "sub/../small.sccb"}]}\n' >"$tmp/mf/manifest.json"
cp "$tmp/small.sccb" "$tmp/mf/small.sccb"
expect 0 "2 layers" -- embed --manifest "$tmp/mf/manifest.json" --name k -o "$tmp/gen/mf.hpp"
[[ -e "$tmp/gen/none.hpp" || -e "$tmp/gen/none.cpp" ]] && { echo "FAIL: a failed embed left an output behind"; failures=$((failures + 1)); }
ls "$tmp/gen" "$tmp/gen/a" | grep -q '\.tmp\.' && { echo "FAIL: embed left a temporary file behind"; failures=$((failures + 1)); }

# prune: patterns on the small matrix and on a 4-D float32 tensor (written with perl's pack, so no
# NumPy is needed), the pruned .npy read back by inspect, and failures that leave no output behind.
# npy_f32 FILE SHAPE VALUES...: a version 1.0 .npy of little-endian float32 values.
npy_f32() {
  local file=$1 shape=$2
  shift 2
  perl -e 'my ($shape, @v) = @ARGV;
    my $h = "{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: $shape, }";
    $h .= " " x (63 - (10 + length($h)) % 64) . "\n";
    print "\x93NUMPY\x01\x00", pack("v", length($h)), $h, pack("f<*", @v);' "$shape" "$@" >"$file"
}
npy_f32 "$tmp/conv.npy" "(2, 3, 2, 2)" $(seq -12 11)
npy_f32 "$tmp/vec.npy" "(4,)" 1 2 3 4
expect 0 "kept 3 nonzeros of 4 \(12 entries\)" -- prune "$tmp/small.mtx" --pattern unstructured --sparsity 0.75 -o "$tmp/p.npy"
expect 0 '"nnz": 3'                -- inspect --json "$tmp/p.npy"
expect 0 '"pattern": "2:4"'        -- prune --json "$tmp/small.mtx" --pattern 2:4 -o "$tmp/nm.npy"
expect 0 "K = 1 of 1x2 per block row" -- prune "$tmp/small.mtx" --pattern rmb:1x2 --sparsity 0.5 -o "$tmp/rmb.npy"
expect 0 '"nnz": 3'                -- inspect --json "$tmp/rmb.npy"
expect 0 "2 x 12 \(f32\), pruned as a matrix from shape \(2, 3, 2, 2\)" -- prune "$tmp/conv.npy" --pattern rmb:2x2@2x6 --sparsity 0.5 -o "$tmp/conv_rmb.npy"
expect 0 "values from f32"         -- inspect "$tmp/conv_rmb.npy"
expect 0 '"kept_nnz": 8'           -- prune --json "$tmp/conv.npy" --pattern block:1x4 --sparsity 0.75 -o "$tmp/conv_block.npy.gz"
expect 0 '"nnz": 8'                -- inspect --json "$tmp/conv_block.npy.gz"
expect 2 "bad pruning pattern 'block:4'" -- prune "$tmp/small.mtx" --pattern block:4 --sparsity 0.5 -o "$tmp/none.npy"
expect 2 "rmb:4x2@6x6.*does not tile" -- prune "$tmp/small.mtx" --pattern rmb:4x2@6x6 --sparsity 0.5 -o "$tmp/none.npy"
expect 2 "sparsity must be in \[0, 1\]" -- prune "$tmp/small.mtx" --pattern unstructured --sparsity 1.5 -o "$tmp/none.npy"
expect 2 "block:2x2 needs --sparsity" -- prune "$tmp/small.mtx" --pattern block:2x2 -o "$tmp/none.npy"
expect 2 "2:4 fixes the sparsity at 0.5" -- prune "$tmp/small.mtx" --pattern 2:4 --sparsity 0.6 -o "$tmp/none.npy"
expect 2 "must be a .npy file"     -- prune "$tmp/small.mtx" --pattern unstructured --sparsity 0.5 -o "$tmp/none.mtx"
expect 2 "nodir does not exist"    -- prune "$tmp/small.mtx" --pattern unstructured --sparsity 0.5 -o "$tmp/nodir/none.npy"
expect 2 "missing.npy: cannot open" -- prune "$tmp/missing.npy" --pattern unstructured --sparsity 0.5 -o "$tmp/none.npy"
expect 2 "bad.mtx:4: .*column"     -- prune "$tmp/bad.mtx" --pattern unstructured --sparsity 0.5 -o "$tmp/none.npy"
expect 2 "vec.npy.*not a matrix"   -- prune "$tmp/vec.npy" --pattern unstructured --sparsity 0.5 -o "$tmp/none.npy"
expect 2 "--pattern"               -- prune "$tmp/small.mtx" --sparsity 0.5 -o "$tmp/none.npy"
[[ -e "$tmp/none.npy" || -e "$tmp/none.mtx" ]] && { echo "FAIL: a failed prune left an output behind"; failures=$((failures + 1)); }
cp "$tmp/p.npy" "$tmp/keep.npy"
expect 2 "bad.mtx:4: "             -- prune "$tmp/bad.mtx" --pattern unstructured --sparsity 0.5 -o "$tmp/keep.npy"
cmp -s "$tmp/p.npy" "$tmp/keep.npy" || { echo "FAIL: a failed prune changed an existing output"; failures=$((failures + 1)); }

# `tune`: the search space without a GPU; a corrupt database is reported and ignored, and compile
# falls back to the predictor's choice; with a GPU, tune then compile the recorded winner and verify.
expect 0 '"candidates": \['        -- tune --space "$tmp/small.mtx" --n 40
expect 0 '"rule": "n tile 64 is wider' -- tune --space "$tmp/small.mtx" --n 8
expect 0 '"op": "hines"'            -- tune --space "$tmp/cell.swc" --resolution 5 --dtype f64
expect 2 "one --db FILE"            -- tune "$tmp/cell.swc"
expect 0 "no record in .*h.json .*the planner's rules" -- hines "$tmp/cell.swc" --db "$tmp/h.json"
expect 2 "f64 or f32, not f16"      -- tune --space "$tmp/cell.swc" --dtype f16
expect 2 "--fit needs the timings"  -- tune --fit
expect 2 "one --db FILE"            -- tune "$tmp/small.mtx" --n 8
expect 2 "--n takes one N, or one per matrix" -- tune "$tmp/small.mtx" "$tmp/small.mtx" --n 8 9 10 --db "$tmp/t.json"
echo '{"schema": 1, "records": [' >"$tmp/corrupt.json"
expect 2 "--refresh-features: name the tuning database with one --db FILE" -- tune --refresh-features "$tmp/small.mtx"
expect 2 "--refresh-features: name the matrices" -- tune --refresh-features --db "$tmp/corrupt.json"
expect 2 "nothere.json: no such tuning database" -- tune --refresh-features "$tmp/small.mtx" --db "$tmp/nothere.json"
cp "$tmp/corrupt.json" "$tmp/corrupt_copy.json"
expect 2 "corrupt_copy.json" -- tune --refresh-features "$tmp/small.mtx" --db "$tmp/corrupt_copy.json"
cmp -s "$tmp/corrupt.json" "$tmp/corrupt_copy.json" || { echo "FAIL: --refresh-features changed a damaged database"; failures=$((failures + 1)); }
echo '{"schema": 1, "records": []}' >"$tmp/empty_db.json"
expect 2 "none of the 0 records of .*empty_db.json is for the 1 matrices given" -- tune --refresh-features "$tmp/small.mtx" --db "$tmp/empty_db.json"
# A database named for a lookup must be readable: a damaged one is bad input, a missing one is empty.
expect 2 "corrupt.json: byte [0-9]+" -- compile "$tmp/small.mtx" --n 8 --db "$tmp/corrupt.json" -o "$tmp/pred.sccb"
[[ -e "$tmp/pred.sccb" ]] && { echo "FAIL: a compile with a damaged --db wrote its output"; failures=$((failures + 1)); }
expect 0 "no record in .*nodb.json .*the predictor's choice R[0-9]+/" -- compile "$tmp/small.mtx" --n 8 --db "$tmp/nodb.json" -o "$tmp/pred.sccb"
expect 0 "plan interpreter .* ok$"  -- verify --cpu "$tmp/pred.sccb"
expect 0 "no cold-L2 record in .*nodb.json .*: the automatic plan" -- compile "$tmp/small.mtx" --n 8 --db "$tmp/nodb.json" --cold-l2 -o "$tmp/pred.sccb"
expect 2 "--cold-l2 times SpMM executors" -- tune "$tmp/cell.swc" --db "$tmp/h.json" --cold-l2
[[ -e "$tmp/h.json" ]] && { echo "FAIL: a refused Hines --cold-l2 tune wrote a database"; failures=$((failures + 1)); }
if [[ -e /dev/nvidia0 ]]; then
  expect 0 "candidates in .* best R"  -- tune "$tmp/small.mtx" --n 64 --db "$tmp/tuning.json" --jobs 4
  # Two matrices tuned at once (their compiles sharing the threads): both records land in the database.
  expect 0 "geomean over 2 matrices"  -- tune "$tmp/small.mtx" "$tmp/blk.mtx" --n 64 --db "$tmp/pair.json" --jobs 4 --matrices-at-once 2
  expect 0 "tuned plan R[0-9]+/.* from $tmp/pair.json" -- compile "$tmp/blk.mtx" --n 64 --db "$tmp/pair.json" -o "$tmp/pair.sccb"
  expect 0 "GPU .* ok$"               -- verify "$tmp/pair.sccb"
  expect 0 "tuned plan R[0-9]+/.* from $tmp/pair.json" -- compile "$tmp/small.mtx" --n 64 --db "$tmp/pair.json" -o "$tmp/pair.sccb"
  expect 0 "tuned plan R[0-9]+/.* from $tmp/tuning.json" -- compile "$tmp/small.mtx" --n 64 --db "$tmp/tuning.json" -o "$tmp/tuned.sccb"
  expect 0 "GPU .* ok$"               -- verify "$tmp/tuned.sccb"
  # Cold-L2 records answer cold lookups only, and warm records warm ones only.
  expect 0 "N = 64, cold L2\): .* candidates in .* best R" -- tune "$tmp/small.mtx" --n 64 --db "$tmp/cold.json" --jobs 4 --cold-l2
  expect 0 "tuned plan R[0-9]+/.* from $tmp/cold.json \(.*, cold L2," -- compile "$tmp/small.mtx" --n 64 --db "$tmp/cold.json" --cold-l2 -o "$tmp/tuned_cold.sccb"
  expect 0 "GPU .* ok$"               -- verify "$tmp/tuned_cold.sccb"
  expect 0 "no record in .*cold.json" -- compile "$tmp/small.mtx" --n 64 --db "$tmp/cold.json" -o "$tmp/tuned_cold.sccb"
  expect 0 "no cold-L2 record in .*tuning.json" -- compile "$tmp/small.mtx" --n 64 --db "$tmp/tuning.json" --cold-l2 -o "$tmp/tuned_cold.sccb"
  expect 0 "candidates in .* best K"  -- tune "$tmp/cell.swc" --resolution 5 --db "$tmp/tuning.json" --jobs 4
  expect 0 "tuned plan K[0-9]+/.* from $tmp/tuning.json" -- hines "$tmp/cell.swc" --resolution 5 --db "$tmp/tuning.json" -o "$tmp/tuned_hines.sccb"
  expect 0 "GPU .* ok$"               -- verify "$tmp/tuned_hines.sccb"
else
  expect 2 "none is usable here"    -- tune "$tmp/cell.swc" --db "$tmp/h.json"
  [[ -e "$tmp/h.json" ]] && { echo "FAIL: a Hines tune without a GPU wrote a database"; failures=$((failures + 1)); }
  expect 2 "none is usable here"    -- tune "$tmp/small.mtx" --n 8 --db "$tmp/t.json"
  [[ -e "$tmp/t.json" ]] && { echo "FAIL: a tune without a GPU wrote a database"; failures=$((failures + 1)); }
fi

# Degenerate and huge shapes: matrices without rows or columns, and more rows than the grid's block
# rows can hold, are refused naming the file and the rule before any work; a tall matrix of empty rows
# compiles quickly (empty rows take no code of their own); too many Hines cells fail before the copies
# are built, within a 1 GiB address space.
mtx_header() { printf '%%%%MatrixMarket matrix coordinate real general\n%s\n' "$1"; }
mtx_header "0 5 0" >"$tmp/rows0.mtx"
mtx_header "5 0 0" >"$tmp/cols0.mtx"
npy_f32 "$tmp/rows0.npy" "(0, 4)"
npy_f32 "$tmp/cols0.npy" "(4, 0)"
{ mtx_header "4194241 4 1"; echo "1 1 1.5"; } >"$tmp/tall.mtx"
{ mtx_header "1048576 8 2"; echo "1 1 1.5"; echo "1048576 8 -2"; } >"$tmp/mega.mtx"
{ mtx_header "131072 64 1"; echo "1 1 1.5"; } >"$tmp/empty_rows.mtx"
shape_rule="SpMM executors take matrices of 1 to 4194240 rows"
expect 2 "rows0.mtx: the matrix is 0x5; $shape_rule" -- compile "$tmp/rows0.mtx" --n 4 -o "$tmp/x.sccb"
expect 2 "cols0.mtx: the matrix is 5x0; $shape_rule .* at least one column" -- compile "$tmp/cols0.mtx" --n 4 -o "$tmp/x.sccb"
expect 2 "rows0.npy: the matrix is 0x4"  -- compile "$tmp/rows0.npy" --n 4 --dtype f16 -o "$tmp/x.sccb"
expect 2 "cols0.npy: the matrix is 4x0"  -- compile "$tmp/cols0.npy" --n 4 --emit cuda -o "$tmp/x.sccb"
expect 2 "rows0.mtx: the matrix is 0x5"  -- tune --space "$tmp/rows0.mtx" --n 4
expect 2 "tall.mtx: the matrix is 4194241x4; $shape_rule \(the grid's 65535 block rows of up to 64 rows\)" -- \
  compile "$tmp/tall.mtx" --n 4 -o "$tmp/x.sccb"
expect 2 "1048576 rows in block rows of 8 rows make 131072 block rows, more than the grid's 65535; take at least 17" -- \
  compile "$tmp/mega.mtx" --n 4 --rows-per-block 8 -o "$tmp/x.sccb"
[[ -e "$tmp/x.sccb" ]] && { echo "FAIL: a refused compile left x.sccb behind"; failures=$((failures + 1)); }
expect 0 '"block_rows":61681'         -- compile "$tmp/mega.mtx" --n 4 --plan-json -o "$tmp/mega.sccb"
expect 0 "plan interpreter .* ok$"    -- verify --cpu "$tmp/mega.sccb"
started=$SECONDS
expect 0 "compiled"                   -- compile "$tmp/empty_rows.mtx" --n 8 --relu -o "$tmp/er.sccb"
expect 0 "compiled"                   -- compile "$tmp/empty_rows.mtx" --n 8 --runtime-n --values streamed -o "$tmp/er2.sccb"
expect 0 "compiled"                   -- compile "$tmp/empty_rows.mtx" --n 8 --dtype f16 -o "$tmp/er3.sccb"
expect 0 "plan interpreter .* ok$"    -- verify --cpu "$tmp/er.sccb"
(( SECONDS - started > 60 )) && { echo "FAIL: 131072 empty rows took $((SECONDS - started)) s to compile"; failures=$((failures + 1)); }
: >"$tmp/empty.swc"
expect 2 "empty.swc: no samples"     -- hines "$tmp/empty.swc"
expect 2 "empty.swc: no samples"     -- tune --space "$tmp/empty.swc"
limited=(prlimit --as=$((1 << 30)) "$bin")
out=$("${limited[@]}" hines "$tmp/cell.swc" --resolution 1000 --cells 1000000 2>&1)
rc=$?
if [[ $rc -ne 2 ]] || ! grep -Eq "1000000 copies of a forest of 4001 compartments are more than the limit of 268435456" <<<"$out"; then
  echo "FAIL: hines --cells 1000000 under a 1 GiB limit -> exit $rc:"; sed 's/^/    /' <<<"$out" | head -n 5
  failures=$((failures + 1))
else
  echo "ok:   hines --resolution 1000 --cells 1000000 (1 GiB address space) -> 2"
fi

# `bench` runs sparsecc_bench next to sparsecc, in ../bench/ or on PATH; alone, it names where it looked.
mkdir "$tmp/lone"
cp "$bin" "$tmp/lone/sparsecc"
out=$(PATH="$tmp/nowhere" "$tmp/lone/sparsecc" bench --help 2>&1)
rc=$?
if [[ $rc -ne 2 ]] || ! grep -Fq "not found (looked in $tmp/lone/sparsecc_bench" <<<"$out"; then
  echo "FAIL: sparsecc bench without sparsecc_bench -> exit $rc (want 2), output:"
  sed 's/^/    /' <<<"$out" | head -n 5
  failures=$((failures + 1))
else
  echo "ok:   sparsecc bench without sparsecc_bench -> 2"
fi
rm -rf "$tmp/lone"
if [[ -n "$bench" && -x "$bench" ]]; then
  expect 0 "--compile-only"        -- bench --help
  expect 2 "--bogus"               -- bench --bogus
  if [[ ! -e /dev/nvidia0 ]]; then
    expect 2 "hines: error: .*needs an NVIDIA GPU" -- bench hines "$tmp/cell.swc"
  fi
else
  echo "skip: sparsecc bench checks (no sparsecc_bench given)"
fi

data=${SPARSECC_DATA_DIR:-}
if [[ -n "$data" && -d "$data" ]]; then
  if [[ -n "$bench" && -x "$bench" && ! -e /dev/nvidia0 ]]; then
    # Without a GPU the timing programs stop with a clear error, never a crash.
    expect 2 "blocklets: error: .*needs an NVIDIA GPU" -- bench blocklets --suite rmb --limit 1 --no-off --data "$data"
  fi
  expect 0 '"cols": 256'  -- inspect --json "$data/dlmc/rn50/magnitude_pruning/0.9/bottleneck_1_block_group1_1_1.smtx.gz"
  expect 0 '"rows": 64'   -- inspect --json "$data/sparsert/mobilenet_v1_sparse90.npz:contraction_1x1_0"
  expect 2 "contraction_1x1_0" -- inspect "$data/sparsert/mobilenet_v1_sparse90.npz"
  expect 2 "nosuch"       -- inspect "$data/sparsert/mobilenet_v1_sparse90.npz:nosuch"
  expect 0 '"kept_nnz": ' -- prune --json "$data/sparsert/mobilenet_v1_sparse90.npz:contraction_1x1_0" --pattern 2:4 -o "$tmp/mb.npy"
  expect 2 "contraction_1x1_0" -- prune "$data/sparsert/mobilenet_v1_sparse90.npz" --pattern 2:4 -o "$tmp/mb2.npy"
  expect 0 '"cells": 1'   -- inspect --json "$data/swc/jaxley/morph_ca1_n120.swc"
  expect 0 "1315000 compartments in 500 cells.*depth 3: 1315000 rows \(K 6.*one thread per cell" -- hines "$data/swc/jaxley/morph_ca1_n120.swc" --cells 500
  expect 0 "wrote $tmp/ca1.sccb: 1 launches per step, 1 segment types" -- hines "$data/swc/jaxley/morph_ca1_n120.swc" --cells 8 --rhs 2 -o "$tmp/ca1.sccb"
  expect 0 "Hines, 21040 compartments in 8 cells, R = 2, f64, plan interpreter .*tolerance [0-9.e-]+\).* ok$" -- verify --cpu "$tmp/ca1.sccb"
  expect 0 "relative error .*: ok"  -- hines "$data/swc/jaxley/morph_ca1_n120.swc" --cells 20 --check
  expect 2 "repeated_id.swc:[0-9]+: " -- inspect "$data/swc/neurom/repeated_id.swc"
  if [[ -n "$bench" && -x "$bench" ]]; then
    # Both emitters on the first two problems, no GPU needed: per emitter, seconds, bytes per nonzero
    # and registers, then the plan.
    expect 0 '^p02_[^ ]+ +[0-9x]+ +[0-9]+( +[0-9.]+){6} +R[0-9]+/T[0-9]+/G[0-9]+/' -- bench --compile-only \
      --suite sparsert --sparsity 0.9 --batch 1 --limit 2 --emit both --data "$data"
  fi
else
  echo "skip: real data checks (SPARSECC_DATA_DIR not set or absent)"
fi

if [[ $failures -ne 0 ]]; then
  echo "$failures CLI check(s) failed"
  exit 1
fi
echo "all CLI checks passed"
