#!/usr/bin/env bash
# Forged bundles through the CLI: metadata edited after the code was generated, with the checksum
# recomputed (sparsecc_forge_bundle), among them compressed bundles whose layout flag is flipped.
# `sparsecc verify` (with and without --cpu) exits 2 naming the
# file and the key that contradicts the code or the plan; the honest bundle still verifies.
#   forged_bundle_test.sh PATH/TO/sparsecc PATH/TO/sparsecc_forge_bundle
set -uo pipefail
bin=$1
forge=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"

# forged NAME POINTER VALUE [SOURCE]: writes $tmp/NAME.sccb from SOURCE (default small).
forged() {
  "$forge" "$tmp/${4:-small}.sccb" "$tmp/$1.sccb" "$2" "$3" || { echo "FAIL: forging $1"; failures=$((failures + 1)); }
}

awk 'BEGIN { print "%%MatrixMarket matrix coordinate real general"; print "24 10 60";
             for (i = 0; i < 60; i++) printf "%d %d %.2f\n", i % 24 + 1, (i * 7) % 10 + 1, (i % 9) / 4 - 1 }' >"$tmp/small.mtx"
expect 0 "compiled"                -- compile "$tmp/small.mtx" --n 8 --rows-per-block 4 -o "$tmp/small.sccb"
expect 0 "max relative error .* ok" -- verify "$tmp/small.sccb" --cpu

# The reported attack: a smaller m (with the block rows to match), the checksum recomputed. The code's
# contract says 24 rows.
"$forge" "$tmp/small.sccb" "$tmp/m.sccb" /m 20 && "$forge" "$tmp/m.sccb" "$tmp/m2.sccb" /block_rows 5 &&
  "$forge" "$tmp/m2.sccb" "$tmp/m3.sccb" /plan_summary/block_rows 5
expect 2 "m3.sccb: m is 20 in the bundle but 24 in the code's sparsecc_contract \((cubin|PTX)\)" -- verify "$tmp/m3.sccb"
expect 2 "m3.sccb: m is 20 in the bundle but 24 in the code's sparsecc_contract" -- verify "$tmp/m3.sccb" --cpu
# The metadata alone contradicts itself.
expect 2 "m.sccb: metadata key 'block_rows': value 6 contradicts m = 20 in panels of 4 rows" -- verify "$tmp/m.sccb" --cpu
forged br /block_rows 7
expect 2 "br.sccb: metadata key 'block_rows': value 7 contradicts plan_summary.block_rows = 6" -- verify "$tmp/br.sccb" --cpu
forged bx /block_x 1024
expect 2 "bx.sccb: metadata key 'block_x'"  -- verify "$tmp/bx.sccb" --cpu
forged sh /shared_bytes 100000
expect 2 "sh.sccb: metadata key 'shared_bytes'" -- verify "$tmp/sh.sccb" --cpu
forged n /n 9
expect 2 "n.sccb: n is 9 in the bundle but 8 in the code's sparsecc_contract" -- verify "$tmp/n.sccb" --cpu --n 9
forged k /k 9
expect 2 "k.sccb: k is 9 in the bundle but 10 in the code's sparsecc_contract" -- verify "$tmp/k.sccb" --cpu

# Hines: a launch's count argument raised.
cat >"$tmp/cell.swc" <<'S'
1 1 0 0 0 5 -1
2 3 10 0 0 1 1
3 3 20 0 0 1 2
4 3 30 5 0 0.8 3
5 3 30 -5 0 0.8 3
S
expect 0 "" -- hines "$tmp/cell.swc" --cells 4 -o "$tmp/h.sccb"
expect 0 "ok$" -- verify "$tmp/h.sccb" --cpu
forged hw /hines/workspace_bytes 8 h
expect 2 "hw.sccb: " -- verify "$tmp/hw.sccb" --cpu
forged hg /hines/launches/0/grid 1000 h
expect 2 "hg.sccb: hines.launches \(digest\) is [0-9]+ in the bundle but [0-9]+ in the code's sparsecc_contract" -- verify "$tmp/hg.sccb" --cpu

# Compressed bundles in both layouts: the layout flag flipped or out of range. Each stream is walked as
# the layout the metadata states, so a flip is refused where the stream stops making sense.
awk 'BEGIN { print "%%MatrixMarket matrix coordinate real general"; print "24 70 60";
             for (i = 0; i < 60; i++) printf "%d %d %.2f\n", i % 24 + 1, (i * 7) % 70 + 1, (i % 9) / 4 - 1 }' >"$tmp/half.mtx"
expect 0 "scatter layout" -- compile "$tmp/half.mtx" --n 8 --dtype f16 --values compressed --compressed-layout scatter -o "$tmp/sc.sccb"
expect 0 "ok$" -- verify "$tmp/sc.sccb" --cpu
expect 0 "records" -- compile "$tmp/half.mtx" --n 8 --dtype f16 --values compressed --compressed-layout records -o "$tmp/rc.sccb"
forged s0 /plan_summary/scatter 0 sc
expect 2 "s0.sccb: section fragments \(byte [0-9]+\): .*compressed stream" -- verify "$tmp/s0.sccb" --cpu
forged s3 /plan_summary/scatter 3 sc
expect 2 "s3.sccb: metadata key 'plan_summary.scatter'" -- verify "$tmp/s3.sccb" --cpu
forged r1 /plan_summary/scatter 1 rc
expect 2 "r1.sccb: section fragments \(byte [0-9]+\): .*scatter stream: .*entry at byte [0-9]+" -- verify "$tmp/r1.sccb" --cpu

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
