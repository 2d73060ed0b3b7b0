#!/usr/bin/env bash
# Convolution executors from the command line: `sparsecc compile --conv SPEC` of a 4-D OIHW tensor and
# of the O x (I*kh*kw) matrix (checked in process through the plan's interpreter against the fp64
# convolution), its JSON, the options it refuses (exit 2), weights that disagree with the geometry
# (exit 2 naming the file), compile-model's --layer-conv for .npz 4-D weights, and embed's accessors.
#   conv_test.sh PATH/TO/sparsecc
set -uo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"

# npy_f32 FILE SHAPE VALUES...: a version 1.0 .npy of little-endian float32 values (perl, no NumPy).
npy_f32() {
  local file=$1 shape=$2
  shift 2
  perl -e 'my ($shape, @v) = @ARGV;
    my $h = "{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: $shape, }";
    $h .= " " x (63 - (10 + length($h)) % 64) . "\n";
    print "\x93NUMPY\x01\x00", pack("v", length($h)), $h, pack("f<*", @v);' "$shape" "$@" >"$file"
}
# sparse VALUES: N values, two thirds of them zero.
sparse() { perl -e 'for my $i (0 .. $ARGV[0] - 1) { print $i % 3 ? "0 " : ((($i * 7) % 11) - 5) / 4, " " }' "$1"; }

npy_f32 "$tmp/w4.npy" "(4, 3, 3, 3)" $(sparse 108)
npy_f32 "$tmp/w2.npy" "(4, 27)" $(sparse 108)
npy_f32 "$tmp/w3.npy" "(4, 3, 9)" $(sparse 108)
npy_f32 "$tmp/b.npy" "(4,)" 0.5 -1 0 2
npy_f32 "$tmp/b3.npy" "(3,)" 0.5 -1 0

# 4-D weights: the channels and the kernel from the tensor; stride 2, asymmetric pads.
expect 0 "convolution 3x3 s2 .*plan interpreter on 2 random image" -- compile "$tmp/w4.npy" --conv 9x8,s2,p0:1:1:0 -o "$tmp/c4.sccb"
expect 0 '"out_height":4'         -- compile "$tmp/w4.npy" --conv 9x8,s2,p0:1:1:0 --json -o "$tmp/c4.sccb"
expect 0 '"spec":"3x9x8,k3x3,s2x2,p0:1:1:0"' -- compile "$tmp/w4.npy" --conv 9x8,s2,p0:1:1:0 --json -o "$tmp/c4.sccb"
# The matrix form, NHWC, bias and ReLU, the CUDA C++ emitter.
expect 0 "convolution"            -- compile "$tmp/w2.npy" --conv 3x9x8,k3,p1 --layout nhwc --bias "$tmp/b.npy" --relu -o "$tmp/c2.sccb"
expect 0 '"layout":"nhwc"'        -- compile "$tmp/w2.npy" --conv 9x8,k3x3,s1,p1x1 --layout nhwc --json -o "$tmp/c2.sccb"
expect 0 "convolution"            -- compile "$tmp/w2.npy" --conv 9x8,k3,s2 --emit cuda -o "$tmp/c2c.sccb"
# f16 and bf16: the unrolled half family (CUDA C++), checked against conv2d of the rounded values; no
# rolled half convolution and no PTX for half precision.
expect 0 "convolution 3x3 s2 .*tolerance 9.8e-04" -- compile "$tmp/w4.npy" --conv 9x8,s2,p1 --dtype f16 --bias "$tmp/b.npy" -o "$tmp/c16.sccb"
expect 0 '"dtype":"bf16"'         -- compile "$tmp/w4.npy" --conv 9x8,s2,p1 --layout nhwc --dtype bf16 --json -o "$tmp/c16b.sccb"
expect 2 "rolled convolution executors are fp32" -- compile "$tmp/w4.npy" --conv 9x8 --dtype f16 --values rolled -o "$tmp/x.sccb"
expect 2 "PTX"                    -- compile "$tmp/w4.npy" --conv 9x8 --dtype f16 --emit ptx -o "$tmp/x.sccb"

# Weights that disagree with the geometry: exit 2 naming the file.
expect 2 "w2.npy.*27 columns"     -- compile "$tmp/w2.npy" --conv 5x9x8,k3 -o "$tmp/x.sccb"
expect 2 "w4.npy.*kernel rows"    -- compile "$tmp/w4.npy" --conv 9x8,k5 -o "$tmp/x.sccb"
expect 2 "w4.npy.*input channels" -- compile "$tmp/w4.npy" --conv 2x9x8 -o "$tmp/x.sccb"
expect 2 "w3.npy.*4-D"            -- compile "$tmp/w3.npy" --conv 9x8,k3 -o "$tmp/x.sccb"
expect 2 "b3.npy.*3 values"       -- compile "$tmp/w4.npy" --conv 9x8 --bias "$tmp/b3.npy" -o "$tmp/x.sccb"
expect 2 "missing.npy: cannot open" -- compile "$tmp/missing.npy" --conv 9x8,k3 -o "$tmp/x.sccb"
# Geometries the executors do not take, and malformed specs: exit 2 naming --conv.
expect 2 "give the kernel"        -- compile "$tmp/w2.npy" --conv 3x9x8 -o "$tmp/x.sccb"
expect 2 "padding"                -- compile "$tmp/w4.npy" --conv 9x8,p3 -o "$tmp/x.sccb"
expect 2 "--conv '9x8,q1'"        -- compile "$tmp/w4.npy" --conv 9x8,q1 -o "$tmp/x.sccb"
expect 2 "--conv 'k3'"            -- compile "$tmp/w4.npy" --conv k3 -o "$tmp/x.sccb"
expect 2 "repeats"                -- compile "$tmp/w4.npy" --conv 9x8,s1,s2 -o "$tmp/x.sccb"
# Options that conflict with a convolution: exit 2.
expect 2 "--n.*not with --conv"   -- compile "$tmp/w4.npy" --conv 9x8 --n 72 -o "$tmp/x.sccb"
expect 2 "--runtime-n.*not with --conv" -- compile "$tmp/w4.npy" --conv 9x8 --runtime-n -o "$tmp/x.sccb"
expect 2 "--db.*not with --conv"  -- compile "$tmp/w4.npy" --conv 9x8 --db "$tmp/t.json" -o "$tmp/x.sccb"
expect 2 "--target.*not with --conv" -- compile "$tmp/w4.npy" --conv 9x8 --target native -o "$tmp/x.sccb"
expect 2 "--layout.*--conv"       -- compile "$tmp/w2.npy" --n 4 --layout nhwc -o "$tmp/x.sccb"
expect 2 "--layout"               -- compile "$tmp/w4.npy" --conv 9x8 --layout chwn -o "$tmp/x.sccb"
expect 2 "--n"                    -- compile "$tmp/w2.npy" -o "$tmp/x.sccb"
[[ ! -e "$tmp/x.sccb" ]] || { echo "FAIL: a refused compile wrote its output"; failures=$((failures + 1)); }

# verify: the bundle's plan through the interpreter (--cpu) against the fp64 convolution.
expect 0 "convolution 3x3 s2 .*plan interpreter \(--cpu\) on 2 random image.* ok" -- verify "$tmp/c4.sccb" --cpu --seed 3
expect 0 " ok"                    -- verify "$tmp/c2.sccb" --cpu
expect 0 "tolerance 9.8e-04.* ok" -- verify "$tmp/c16.sccb" --cpu
expect 2 "--n.*output pixels"     -- verify "$tmp/c4.sccb" --n 5 --cpu

# embed: the convolution's geometry and shapes beside the executor.
expect 0 ""                       -- embed "$tmp/c4.sccb" --name convs -o "$tmp/convs.hpp"
for want in "kConv = true" "kInChannels = 3, kHeight = 9, kWidth = 8, kOutChannels = 4, kOutHeight = 4, kOutWidth = 4" \
  "kStrideH = 2" "kPadTop = 0, kPadLeft = 1, kPadBottom = 1, kPadRight = 0" "input_shape(std::int64_t batch)" \
  "run_conv" "#include <array>"; do
  grep -qF -- "$want" "$tmp/convs.hpp" || { echo "FAIL: convs.hpp lacks '$want'"; failures=$((failures + 1)); }
done

# compile-model: .npz 4-D weights with --layer-conv (an npz is a zip of .npy members).
cp "$tmp/w4.npy" "$tmp/c1.weight.npy"
cp "$tmp/b.npy" "$tmp/c1.bias.npy"
npy_f32 "$tmp/fc.weight.npy" "(5, 6)" $(sparse 30)
(cd "$tmp" && zip -q m.npz c1.weight.npy c1.bias.npy fc.weight.npy)
expect 0 "skipped c1.weight: not 2-D" -- compile-model "$tmp/m.npz" --max-density 1 --list
expect 0 "conv geometry \(3x3 s2"  -- compile-model "$tmp/m.npz" --max-density 1 --layer-conv 'c1=9x8,s2,p1' --list
expect 2 "m.npz.*c1.weight"       -- compile-model "$tmp/m.npz" --max-density 1 --layer-conv 'c1=5x9x8,s2' --list
expect 2 "--layer-conv 'c1'"      -- compile-model "$tmp/m.npz" --layer-conv 'c1' --list
expect 0 "convolution 3x3 s2"     -- compile-model "$tmp/m.npz" --max-density 1 --layer-conv 'c1=9x8,s2,p1' --dtype f16 -o "$tmp/mf16"
grep -qF '"dtype": "f16"' "$tmp/mf16/manifest.json" || { echo "FAIL: mf16/manifest.json lacks the f16 dtype"; failures=$((failures + 1)); }
expect 0 "convolution 3x3 s2"     -- compile-model "$tmp/m.npz" --max-density 1 --layer-conv 'c1=9x8,s2,p1' -o "$tmp/model"
for want in '"conv":' '"spec": "3x9x8,k3x3,s2x2,p1:1:1:1"' '"n_from": "conv geometry"'; do
  grep -qF -- "$want" "$tmp/model/manifest.json" || { echo "FAIL: manifest.json lacks '$want'"; failures=$((failures + 1)); }
done
expect 0 "N from"                 -- compile-model "$tmp/m.npz" --max-density 1 --layer-conv 'c1=9x8,s2,p1' --conv-as-gemm --list
expect 0 ""                       -- embed --manifest "$tmp/model/manifest.json" --name model -o "$tmp/model.hpp"
grep -qF "kOutChannels = 4" "$tmp/model.hpp" || { echo "FAIL: model.hpp lacks the convolution"; failures=$((failures + 1)); }

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
