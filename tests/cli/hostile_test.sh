#!/usr/bin/env bash
# The CLI on small hostile inputs (malformed, lying or degenerate files under 10 MB; device files and
# FIFOs behind a path) under a memory and a time limit, and the user's files around -o:
#  - each case runs as `timeout LIMIT prlimit --as=AS sparsecc ...` under GNU time; it passes when
#    it ends without a signal or timeout, with the expected exit status (0 valid input, 2 bad input),
#    with output matching the case's regex (the file, and the place where the class asks for it),
#    with a peak RSS under 1 GiB and in under 60 s. AS is 1 GiB above the address space a trivial
#    compile reserves (measured first), so that a runaway allocation fails fast instead of swapping.
#  - -o cases check that the user's files (inputs, device nodes, FIFOs, folders) are unchanged.
# Prints a table (case, exit, peak MiB, seconds, verdict) and writes it to $HOSTILE_LOG (default
# ./hostile_peaks.txt). Exit 77 (skipped) without prlimit, GNU time, timeout or mkfifo.
#   hostile_test.sh PATH/TO/sparsecc PATH/TO/make_hostile_fixtures
#
# Cases are one line each: `check NAME EXIT REGEX -- ARGS...`, EXIT an extended regex of the allowed
# statuses ("2", "0|2"), REGEX an extended regex the combined stdout and stderr must match ("" for
# any). Environment: HOSTILE_ONLY (an extended regex: run only the cases whose name matches it),
# HOSTILE_TIME_LIMIT (seconds, default 60), HOSTILE_PEAK_MIB (default 1024), HOSTILE_NO_AS=1 (no --as:
# the peak RSS is still checked).
set -uo pipefail
bin=$1
maker=$2
time_limit=${HOSTILE_TIME_LIMIT:-60}
peak_limit_mib=${HOSTILE_PEAK_MIB:-1024}
only=${HOSTILE_ONLY:-}
log=${HOSTILE_LOG:-$PWD/hostile_peaks.txt}

for tool in prlimit timeout mkfifo gzip awk sha256sum; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
gnu_time=/usr/bin/time
"$gnu_time" -f '%M %e' -o /dev/null true 2>/dev/null || { echo "SKIP: GNU time (/usr/bin/time) is not installed"; exit 77; }

tmp=$(mktemp -d)
feeders=()
stop_feeders() {
  local p
  for p in "${feeders[@]}"; do
    kill "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  feeders=()
}
cleanup() {
  stop_feeders
  chmod -R u+w "$tmp" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
ulimit -c 0                # a crash is reported by its signal, without a core file
export MALLOC_ARENA_MAX=2  # address space per thread stays small under --as
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
in=$tmp/in
out=$tmp/out
mkdir -p "$in" "$out"

# ---- Fixtures -----------------------------------------------------------------------------------
"$maker" "$in" || { echo "FAIL: make_hostile_fixtures"; exit 1; }
cat >"$in/small.mtx" <<'M'
%%MatrixMarket matrix coordinate real general
3 4 4
1 1 1.5
2 3 -2
3 1 4
3 4 0.25
M
printf '3, 4, 4\n0 1 2 4\n0 2 0 3\n' >"$in/small.smtx"
cat >"$in/cell.swc" <<'S'
1 1 0 0 0 5 -1
2 3 10 0 0 1 1
3 3 20 0 0 1 2
4 3 30 5 0 0.8 3
5 3 30 -5 0 0.8 3
S
mtx() {  # mtx FILE ROWS COLS NNZ [ENTRY LINES...]: a coordinate header and the given entries
  local f=$1
  printf '%%%%MatrixMarket matrix coordinate real general\n%s %s %s\n' "$2" "$3" "$4" >"$f"
  shift 4
  local l
  for l in "$@"; do printf '%s\n' "$l" >>"$f"; done
}
# Degenerate sizes: empty rows, zero rows or columns, the largest dimensions the readers accept.
mtx "$in/rows131k_one_nnz.mtx" 131072 131072 1 "1 1 1.5"
mtx "$in/rows2p20_one_nnz.mtx" 1048576 16 1 "1 1 1.5"
mtx "$in/rows2p24_one_nnz.mtx" 16777216 16 1 "1 1 1.5"
mtx "$in/zero_rows.mtx" 0 4 0
mtx "$in/zero_cols.mtx" 4 0 0
mtx "$in/zero_both.mtx" 0 0 0
mtx "$in/no_nnz.mtx" 4 4 0
{ # 2^20 rows of one nonzero each (every block row busy), 16 columns; gzip keeps it at about 2 MB
  printf '1048576, 16, 1048576\n'
  seq 0 1048576 | tr '\n' ' '
  printf '\n'
  seq 0 1048575 | awk '{ printf "%d ", $1 % 16 } END { printf "\n" }'
} | gzip -1 >"$in/rows2p20_full.smtx.gz"
{ # 2^20 rows with a nonzero every 64th row: a few nonzeros spread over every block row
  printf '1048576, 64, 16384\n'
  awk 'BEGIN { for (r = 0; r <= 1048576; ++r) printf "%d ", int((r + 63) / 64); printf "\n";
               for (i = 0; i < 16384; ++i) printf "%d ", i % 64; printf "\n" }'
} | gzip -1 >"$in/rows2p20_spread.smtx.gz"
# A safetensors header whose tensor shape is an array nested 100000 levels deep (the maker's deep
# files nest elsewhere).
deep=$(head -c 100000 /dev/zero | tr '\0' '[')$(head -c 100000 /dev/zero | tr '\0' ']')
header="{\"w\":{\"dtype\":\"F32\",\"shape\":$deep,\"data_offsets\":[0,0]}}"
n=${#header}
# shellcheck disable=SC2059 # the 8-byte little-endian length, as octal escapes
{ printf "$(printf '\\%03o' $((n & 255)) $((n >> 8 & 255)) $((n >> 16 & 255)) $((n >> 24 & 255)) 0 0 0 0)"; printf '%s' "$header"; } >"$in/deep_shape.safetensors"
# Headers that declare far more than the file holds.
mtx "$in/huge_header.mtx" 16777216 16777216 281474976710656 "1 1 1.5"
printf '16777216, 16777216, 1000000000000\n0 1\n0\n' >"$in/huge_header.smtx"
# Device files and FIFOs behind a path (by extension, where the format is chosen by it).
for f in zero.mtx zero.npy zero.swc zero.sccb zero.bin zero.json; do ln -s /dev/zero "$in/$f"; done
for f in fifo.mtx fifo.npy fifo.json fifo.sccb; do mkfifo "$in/$f"; done
# feed FIFO: an endless writer behind the FIFO for the next case (stopped by stop_feeders).
feed() {
  (exec cat /dev/zero >"$1") 2>/dev/null &
  feeders+=($!)
}
# A bundle to forge, to embed from outside a manifest's folder, and a manifest entry per device.
"$bin" compile "$in/small.mtx" --n 4 --emit ptx -o "$in/small.sccb" >/dev/null 2>&1 ||
  { echo "FAIL: cannot compile the bundle the forgeries start from"; exit 1; }
"$maker" "$in" "$in/small.sccb" || { echo "FAIL: make_hostile_fixtures (forged bundles)"; exit 1; }
manifest() {  # manifest FOLDER FILE-ENTRY: a compile-model manifest of one layer "escape"
  mkdir -p "$1"
  printf '{"layers": [{"name": "escape", "file": "%s"}]}\n' "$2" >"$1/manifest.json"
}
mkdir -p "$in/outside"
cp "$in/small.sccb" "$in/outside/outside.sccb"
manifest "$in/m_dotdot" "../outside/outside.sccb"
manifest "$in/m_absolute" "$in/outside/outside.sccb"
manifest "$in/m_passwd" "/etc/passwd"
manifest "$in/m_zero" "zero.sccb" && ln -s /dev/zero "$in/m_zero/zero.sccb"
manifest "$in/m_fifo" "fifo.sccb" && mkfifo "$in/m_fifo/fifo.sccb"
manifest "$in/m_dev" "/dev/zero"
# The files -o must leave alone.
cp "$in/small.mtx" "$in/victim.mtx"
cp "$in/cell.swc" "$in/victim.swc"
cp "$in/model.npz" "$in/victim.npz"
mkfifo "$in/out.fifo"
have_node=0
if [[ $(id -u) -eq 0 ]] && mknod "$in/null" c 1 3 2>/dev/null; then have_node=1; fi
mkdir -p "$in/userdir" && echo keep >"$in/userdir/notes.txt" && echo '{"mine": true}' >"$in/userdir/manifest.json"
mkdir -p "$in/a_folder"

# ---- The limit on address space -----------------------------------------------------------------
# The smallest --as (in 32 MiB steps) under which a trivial compile, verify, compile-model and hines
# compile succeed (NVRTC, nvJitLink and a GPU driver reserve address space); the cases run with 1 GiB
# more. Without one up to 64 GiB, cases run without --as (peak RSS still checked).
fits() {
  prlimit --as="$1" -- "$bin" compile "$in/small.mtx" --n 4 -o "$tmp/base.sccb" >/dev/null 2>&1 &&
    prlimit --as="$1" -- "$bin" verify --cpu "$tmp/base.sccb" >/dev/null 2>&1 &&
    prlimit --as="$1" -- "$bin" hines "$in/cell.swc" -o "$tmp/base_hines.sccb" >/dev/null 2>&1 &&
    prlimit --as="$1" -- "$bin" compile-model "$in/model.npz" --n 8 --jobs 1 -o "$tmp/base_model" >/dev/null 2>&1 &&
    rm -rf "$tmp/base_model"
}
mib=$((1 << 20))
hi=$((64 * mib))
[[ -n ${HOSTILE_NO_AS:-} ]] && hi=$((128 * 1024 * mib))
while ((hi <= 64 * 1024 * mib)) && ! fits "$hi"; do hi=$((hi * 2)); done
limit=()
if ((hi <= 64 * 1024 * mib)); then
  lo=$((hi / 2))
  while ((hi - lo > 32 * mib)); do
    mid=$(((lo + hi) / 2))
    if fits "$mid"; then hi=$mid; else lo=$mid; fi
  done
  as=$((hi + 1024 * mib))
  limit=(prlimit --as="$as" --)
  as_note="--as $((as / mib)) MiB (a trivial compile needs $((hi / mib)) MiB of address space)"
else
  as_note="no --as limit (HOSTILE_NO_AS, or a trivial compile does not run under 64 GiB of address space)"
fi

# ---- Running a case -----------------------------------------------------------------------------
printf '%s\n' "hostile inputs: $as_note, timeout ${time_limit} s, peak RSS limit ${peak_limit_mib} MiB" | tee "$log"
printf '%-34s %5s %9s %8s  %s\n' case exit peak_MiB seconds verdict | tee -a "$log"
# check NAME EXIT REGEX -- ARGS...: runs sparsecc ARGS under the limits; see the header.
check() {
  local name=$1 want=$2 pattern=$3
  shift 4
  [[ -n $only && ! $name =~ $only ]] && { stop_feeders; return; }
  local o=$tmp/case.out t=$tmp/case.time rc peak secs why=()
  "$gnu_time" -o "$t" -f '%M %e' timeout -k 5 "$time_limit" "${limit[@]}" "$bin" "$@" >"$o" 2>&1 </dev/null
  rc=$?
  stop_feeders
  read -r peak secs < <(tail -n 1 "$t")
  [[ $peak =~ ^[0-9]+$ ]] || peak=0
  [[ $secs =~ ^[0-9.]+$ ]] || secs=0
  if ((rc == 124 || rc == 137)); then
    why+=("timed out")
  elif ((rc > 128)); then
    why+=("killed by signal $((rc - 128))")
  elif ! [[ $rc =~ ^($want)$ ]]; then
    why+=("exit $rc, want $want")
  fi
  if [[ -n $pattern ]] && ! grep -Eq -- "$pattern" "$o"; then why+=("output must match /$pattern/"); fi
  ((peak > peak_limit_mib * 1024)) && why+=("peak over ${peak_limit_mib} MiB")
  awk -v s="$secs" -v l="$time_limit" 'BEGIN { exit !(s > l) }' && why+=("over ${time_limit} s")
  local verdict=ok
  if ((${#why[@]})); then
    verdict="FAIL: $(IFS=';'; echo "${why[*]}")"
    failures=$((failures + 1))
  fi
  printf '%-34s %5s %9.1f %8.2f  %s\n' "$name" "$rc" "$(awk -v k="$peak" 'BEGIN { print k / 1024 }')" "$secs" \
    "$verdict" | tee -a "$log"
  if [[ $verdict != ok ]]; then
    echo "      sparsecc $*" | cut -c1-300
    head -c 1500 "$o" | head -n 8 | sed 's/^/      | /'
  fi
}
# A bundle a case wrote must pass the plan interpreter.
check_bundle() {
  local name=$1 bundle=$2
  [[ -f $bundle ]] && check "$name" 0 "ok" -- verify --cpu "$bundle"
}
# kept CASE FILE...: fails unless each FILE still has the type and content it had at the start.
declare -A kept_sig
signature() {
  if [[ -f $1 && ! -L $1 ]]; then echo "file $(sha256sum <"$1")"; else stat -c '%F' "$1" 2>/dev/null || echo missing; fi
}
for f in "$in"/victim.* "$in/out.fifo" "$in/userdir/notes.txt" "$in/userdir/manifest.json" "$in/small.mtx" \
  "$in/model.npz" "$in/cell.swc" "$in/a_folder" "$in/outside/outside.sccb"; do
  kept_sig[$f]=$(signature "$f")
done
((have_node)) && kept_sig[$in/null]=$(signature "$in/null")
kept() {
  local name=$1 f
  shift
  [[ -n $only && ! $name =~ $only ]] && return
  for f in "$@"; do
    [[ $(signature "$f") == "${kept_sig[$f]-}" ]] || fail "$name: ${f#"$tmp"/} was $(cut -c1-20 <<<"${kept_sig[$f]-}"), now $(signature "$f" | cut -c1-20)"
  done
}

# ---- The cases ----------------------------------------------------------------------------------
i=$in
o=$out
# 1. JSON nested 100000 levels deep, wherever a user's file holds JSON: depth and size limits, exit 2.
check deep_json.safetensors.inspect  2 "deep\.safetensors"   -- inspect "$i/deep.safetensors"
check deep_json.safetensors.compile  2 "deep\.safetensors"   -- compile "$i/deep.safetensors" --n 4 -o "$o/x.sccb"
check deep_json.safetensors.model    2 "deep\.safetensors"   -- compile-model "$i/deep.safetensors" -o "$o/deep_st"
check deep_json.st_shape.inspect     2 "deep_shape\.safetensors" -- inspect "$i/deep_shape.safetensors"
check deep_json.st_shape.model       2 "deep_shape\.safetensors" -- compile-model "$i/deep_shape.safetensors" --jobs 1 -o "$o/deep_shape"
check deep_json.manifest.embed       2 "deep_manifest\.json" -- embed --manifest "$i/deep_manifest.json" --name a -o "$o/deep.hpp"
check deep_json.db.compile           2 "deep_db\.json"       -- compile "$i/small.mtx" --n 4 --db "$i/deep_db.json" -o "$o/x.sccb"
check deep_json.db.compile_model     2 "deep_db\.json"       -- compile-model "$i/model.npz" --n 8 --jobs 1 --db "$i/deep_db.json" -o "$o/deep_db"
check deep_json.db.hines             2 "deep_db\.json"       -- hines "$i/cell.swc" --db "$i/deep_db.json" -o "$o/x.sccb"
check deep_json.db.tune_evaluate     2 "deep_db\.json"       -- tune --evaluate --db "$i/deep_db.json"
check deep_json.db.tune_fit          2 "deep_db\.json"       -- tune --fit --db "$i/deep_db.json" -o "$o/p.json"
check deep_json.predictor.evaluate   2 "deep_(predictor|db)\.json" -- tune --evaluate --db "$i/deep_db.json" --predictor "$i/deep_predictor.json"
check deep_json.bundle_metadata      2 "deep_metadata\.sccb" -- verify --cpu "$i/deep_metadata.sccb"
check deep_json.bundle_embed         2 "deep_metadata\.sccb" -- embed "$i/deep_metadata.sccb" --name a -o "$o/deepb.hpp"

# 2. Data loss: -o never replaces an input or anything but a regular file (or a folder sparsecc wrote).
check out_is_input.compile           2 "victim\.mtx"  -- compile "$i/victim.mtx" --n 4 -o "$i/victim.mtx"
kept out_is_input.compile "$i/victim.mtx"
check out_is_input.hines             2 "victim\.swc"  -- hines "$i/victim.swc" -o "$i/victim.swc"
kept out_is_input.hines "$i/victim.swc"
check out_is_input.compile_model     2 "victim\.npz"  -- compile-model "$i/victim.npz" --jobs 1 -o "$i/victim.npz"
kept out_is_input.compile_model "$i/victim.npz"
check out_is_input.prune             2 "victim\.npz"  -- prune "$i/victim.npz:fc1.weight" --pattern unstructured --sparsity 0.5 -o "$i/victim.npz"
kept out_is_input.prune "$i/victim.npz"
check out_is_bias.compile            2 "victim\.npz"  -- compile "$i/small.mtx" --n 4 --bias "$i/victim.npz:fc1.weight" -o "$i/victim.npz"
kept out_is_bias.compile "$i/victim.npz"
check out_fifo.compile               2 "out\.fifo"    -- compile "$i/small.mtx" --n 4 -o "$i/out.fifo"
check out_fifo.hines                 2 "out\.fifo"    -- hines "$i/cell.swc" -o "$i/out.fifo"
check out_fifo.embed                 2 "out\.fifo"    -- embed "$i/small.sccb" --name a -o "$i/out.fifo"
check out_fifo.prune                 2 "out\.fifo"    -- prune "$i/small.mtx" --pattern unstructured --sparsity 0.5 -o "$i/out.fifo"
kept out_fifo "$i/out.fifo" "$i/small.mtx" "$i/cell.swc"
if ((have_node)); then  # a character device like /dev/null, made in the test's folder
  check out_device.compile           2 "null"         -- compile "$i/small.mtx" --n 4 -o "$i/null"
  check out_device.hines             2 "null"         -- hines "$i/cell.swc" -o "$i/null"
  check out_device.compile_model     2 "null"         -- compile-model "$i/model.npz" --jobs 1 -o "$i/null"
  kept out_device "$i/null"
fi
check out_foreign_folder.model       2 "userdir"      -- compile-model "$i/model.npz" --jobs 1 -o "$i/userdir"
kept out_foreign_folder.model "$i/userdir/notes.txt" "$i/userdir/manifest.json"
check out_folder.compile             2 "a_folder"     -- compile "$i/small.mtx" --n 4 -o "$i/a_folder"
kept out_folder.compile "$i/a_folder"

# 3. Reads outside the folder: manifest entries resolve inside the manifest's folder.
check manifest_dotdot.embed          2 "manifest\.json.*(escape|outside)" -- embed --manifest "$i/m_dotdot/manifest.json" --name a -o "$o/dotdot.hpp"
[[ -e $o/dotdot.hpp ]] && fail "manifest_dotdot.embed wrote the header"
check manifest_absolute.embed        2 "manifest\.json.*(escape|outside)" -- embed --manifest "$i/m_absolute/manifest.json" --name a -o "$o/abs.hpp"
[[ -e $o/abs.hpp ]] && fail "manifest_absolute.embed wrote the header"
check manifest_passwd.embed          2 "manifest\.json.*(escape|passwd)" -- embed --manifest "$i/m_passwd/manifest.json" --name a -o "$o/pw.hpp"
kept manifest_outside "$i/outside/outside.sccb"

# 4. Bounded memory: lying sizes, bombs, device files and FIFOs, sizes beyond the limits.
check lying_zip_size.inspect         2 "lying\.npz"          -- inspect "$i/lying.npz"
check lying_zip_size.compile         2 "lying\.npz.*w"       -- compile "$i/lying.npz:w" --n 4 -o "$o/x.sccb"
check lying_zip_size.model           2 "lying\.npz"          -- compile-model "$i/lying.npz" --jobs 1 -o "$o/lying"
check bomb.npz.inspect               2 "bomb\.npz"           -- inspect "$i/bomb.npz"
check bomb.npz.compile               2 "bomb\.npz"           -- compile "$i/bomb.npz:w" --n 4 -o "$o/x.sccb"
check bomb.npz.model                 2 "bomb\.npz"           -- compile-model "$i/bomb.npz" --jobs 1 -o "$o/bomb"
check bomb.npz.bias                  2 "bomb\.npz"           -- compile "$i/small.mtx" --n 4 --bias "$i/bomb.npz:w" -o "$o/x.sccb"
check bomb.mtx_gz.inspect            2 "bomb\.mtx\.gz"       -- inspect "$i/bomb.mtx.gz"
check bomb.mtx_gz.compile            2 "bomb\.mtx\.gz"       -- compile "$i/bomb.mtx.gz" --n 4 -o "$o/x.sccb"
check bomb.smtx_gz.inspect           2 "bomb\.smtx\.gz"      -- inspect "$i/bomb.smtx.gz"
check bomb.smtx_gz.prune             2 "bomb\.smtx\.gz"      -- prune "$i/bomb.smtx.gz" --pattern unstructured --sparsity 0.5 -o "$o/x.npy"
check huge_header.mtx                2 "huge_header\.mtx"    -- inspect "$i/huge_header.mtx"
check huge_header.smtx               2 "huge_header\.smtx"   -- inspect "$i/huge_header.smtx"
check huge_header.npy                2 "huge_shape\.npy"     -- inspect "$i/huge_shape.npy"
check huge_header.npz                2 "huge_shape\.npz"     -- inspect "$i/huge_shape.npz"
check huge_header.safetensors        2 "huge_shape\.safetensors" -- inspect "$i/huge_shape.safetensors"
check dev_zero.matrix_mtx            2 "zero\.mtx"           -- inspect "$i/zero.mtx"
check dev_zero.matrix_npy            2 "zero\.npy"           -- compile "$i/zero.npy" --n 4 -o "$o/x.sccb"
check dev_zero.swc                   2 "zero\.swc"           -- hines "$i/zero.swc"
check dev_zero.bias                  2 "zero\.npy"           -- compile "$i/small.mtx" --n 4 --bias "$i/zero.npy" -o "$o/x.sccb"
check dev_zero.db                    2 "/dev/zero"           -- compile "$i/small.mtx" --n 4 --db /dev/zero -o "$o/x.sccb"
check dev_zero.db_link               2 "zero\.json"          -- compile-model "$i/model.npz" --jobs 1 --db "$i/zero.json" -o "$o/dz"
check dev_zero.layer_n_file          2 "/dev/zero"           -- compile-model "$i/model.npz" --jobs 1 --layer-n-file /dev/zero -o "$o/dz"
check dev_zero.manifest              2 "/dev/zero"           -- embed --manifest /dev/zero --name a -o "$o/z.hpp"
check dev_zero.manifest_entry        2 "zero\.sccb"          -- embed --manifest "$i/m_zero/manifest.json" --name a -o "$o/z.hpp"
check dev_zero.manifest_entry_abs    2 "manifest\.json.*(escape|/dev/zero)" -- embed --manifest "$i/m_dev/manifest.json" --name a -o "$o/z.hpp"
check dev_zero.bundle                2 "zero\.sccb"          -- verify --cpu "$i/zero.sccb"
if [[ -f $i/external_zero.onnx ]]; then
  check dev_zero.onnx_external       2 "zero\.bin"           -- compile-model "$i/external_zero.onnx" --jobs 1 -o "$o/ext"
fi
feed "$i/fifo.mtx"
check fifo.matrix                    2 "fifo\.mtx"           -- inspect "$i/fifo.mtx"
feed "$i/fifo.npy"
check fifo.bias                      2 "fifo\.npy"           -- compile "$i/small.mtx" --n 4 --bias "$i/fifo.npy" -o "$o/x.sccb"
feed "$i/fifo.json"
check fifo.db                        2 "fifo\.json"          -- compile "$i/small.mtx" --n 4 --db "$i/fifo.json" -o "$o/x.sccb"
feed "$i/m_fifo/fifo.sccb"
check fifo.manifest_entry            2 "fifo\.sccb"          -- embed --manifest "$i/m_fifo/manifest.json" --name a -o "$o/f.hpp"
check hines_cells.over_limit         2 "cells|compartments"  -- hines "$i/cell.swc" --resolution 100 --cells 1000000
check hines_cells.over_limit_out     2 "cells|compartments"  -- hines "$i/cell.swc" --resolution 100 --cells 1000000 -o "$o/x.sccb"
check hines_cells.cli_range          2 "cells"               -- hines "$i/cell.swc" --cells 100000000
check hines_cells.tune_space         2 "cells|compartments"  -- tune "$i/cell.swc" --resolution 100 --cells 1000000 --space
check hines_cells.million            "0|2" "planned|cells.*(limit|at most)" -- hines "$i/cell.swc" --cells 1000000
check empty_rows.131k.inspect        0 "131072"              -- inspect "$i/rows131k_one_nnz.mtx"
check empty_rows.131k.compile        0 ""                    -- compile "$i/rows131k_one_nnz.mtx" --n 8 -o "$o/r131k.sccb"
check_bundle empty_rows.131k.verify "$o/r131k.sccb"
check empty_rows.131k.runtime_n      0 ""                    -- compile "$i/rows131k_one_nnz.mtx" --n 8 --runtime-n --values streamed -o "$o/r131k_rt.sccb"
check empty_rows.131k.prune          "0|2" "rows131k"        -- prune "$i/rows131k_one_nnz.mtx" --pattern unstructured --sparsity 0.5 -o "$o/r131k.npy"

# 5. Valid input: degenerate sizes compile (or are refused at the input with the limit); a non-float
#    tensor beside the matrix; one rule for NaN in every format; messages name the file and entry.
check rows_2p20.one_nnz              "0|2" "compiled|rows2p20_one_nnz\.mtx.*(limit|at most)" -- compile "$i/rows2p20_one_nnz.mtx" --n 8 -o "$o/r20.sccb"
check_bundle rows_2p20.one_nnz.verify "$o/r20.sccb"
check rows_2p20.full                 "0|2" "compiled|rows2p20_full\.smtx\.gz.*(limit|at most)" -- compile "$i/rows2p20_full.smtx.gz" --n 8 -o "$o/r20f.sccb"
check_bundle rows_2p20.full.verify "$o/r20f.sccb"
check rows_2p20.spread               0 "rolled values" -- compile "$i/rows2p20_spread.smtx.gz" --n 8 -o "$o/r20s.sccb"
check_bundle rows_2p20.spread.verify "$o/r20s.sccb"
check rows_2p20.spread_f16           2 "more than the 32768 an unrolled executor takes" -- compile "$i/rows2p20_spread.smtx.gz" --n 8 --dtype f16 -o "$o/r20s16.sccb"
check rows_2p24.one_nnz              2 "rows2p24_one_nnz\.mtx: the matrix is 16777216x16; SpMM executors take matrices of 1 to 4194240 rows" -- compile "$i/rows2p24_one_nnz.mtx" --n 8 -o "$o/r24.sccb"
for z in zero_rows zero_cols zero_both no_nnz; do
  check "empty.$z"                   "0|2" "$z\.mtx|compiled|wrote" -- compile "$i/$z.mtx" --n 4 -o "$o/$z.sccb"
  check_bundle "empty.$z.verify" "$o/$z.sccb"
done
check non_float.npz.compile          0 ""                    -- compile "$i/mixed.npz" --n 4 -o "$o/mixed_npz.sccb"
check non_float.npz.model            0 "wrote 1 bundle"      -- compile-model "$i/mixed.npz" --jobs 1 -o "$o/mixed_npz"
check non_float.safetensors.compile  0 ""                    -- compile "$i/mixed.safetensors" --n 4 -o "$o/mixed_st.sccb"
check non_float.safetensors.model    0 "wrote 1 bundle"      -- compile-model "$i/mixed.safetensors" --jobs 1 -o "$o/mixed_st"
check nan.npz.model                  2 "nan\.npz.*w"         -- compile-model "$i/nan.npz" --jobs 1 -o "$o/nan_npz"
check nan.safetensors.model          2 "nan\.safetensors.*w" -- compile-model "$i/nan.safetensors" --jobs 1 -o "$o/nan_st"
if [[ -f $i/nan.onnx ]]; then
  check nan.onnx.model               2 "nan\.onnx.*W"        -- compile-model "$i/nan.onnx" --jobs 1 -o "$o/nan_onnx"
fi
check overflow.npz.compile           2 "overflow\.npz.*w"    -- compile "$i/overflow.npz:w" --n 4 -o "$o/x.sccb"
check overflow.npz.model             2 "overflow\.npz.*w"    -- compile-model "$i/overflow.npz" --jobs 1 -o "$o/ovf_npz"
check overflow.safetensors.model     2 "overflow\.safetensors.*w" -- compile-model "$i/overflow.safetensors" --jobs 1 -o "$o/ovf_st"

# 6. Output-path problems and bad options: exit 2 with the cause, before the work.
check out_path.missing_folder        2 "nofolder"            -- compile "$i/small.mtx" --n 4 -o "$o/nofolder/x.sccb"
check out_path.missing_folder_hines  2 "nofolder"            -- hines "$i/cell.swc" -o "$o/nofolder/x.sccb"
check out_path.empty                 2 "output|-o"           -- compile "$i/small.mtx" --n 4 -o ""
if [[ $(id -u) -ne 0 ]]; then  # root writes into read-only folders
  mkdir -p "$o/readonly" && chmod a-w "$o/readonly"
  check out_path.read_only           2 "readonly"            -- compile "$i/small.mtx" --n 4 -o "$o/readonly/x.sccb"
fi
check bad_option.xptxas              2 "bogus"               -- compile "$i/small.mtx" --n 4 --emit ptx --Xptxas=--bogus-option -o "$o/x.sccb"
check bad_option.seed_negative       2 "seed"                -- compile "$i/small.smtx" --n 4 --seed -1 -o "$o/x.sccb"

# 7. A forged bundle (metadata m halved, checksum recomputed): refused where it is loaded.
check forged_bundle.verify           2 "forged_m\.sccb"      -- verify --cpu "$i/forged_m.sccb"
check forged_bundle.embed            2 "forged_m\.sccb"      -- embed "$i/forged_m.sccb" --name a -o "$o/forged.hpp"

# Nothing an -o case was given may be left replaced, and no temporary files beside the inputs.
kept final "${!kept_sig[@]}"
leftovers=$(find "$in" -name '*.tmp.*' | head -n 5)
[[ -z $leftovers ]] || fail "temporary files left: $leftovers"

echo "table written to $log"
if ((failures)); then
  echo "$failures hostile-input check(s) failed"
  exit 1
fi
echo "all hostile-input checks passed"
