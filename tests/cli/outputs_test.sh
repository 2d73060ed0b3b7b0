#!/usr/bin/env bash
# Outputs never replace what the user had: for every command that writes (compile, compile-model,
# hines, prune, tune, embed, sparsecc_bench --json), an output that is an input (by any spelling, a
# symbolic or a hard link), a device, a FIFO, a folder, a path in a missing folder or inside a file,
# an empty path or a read-only folder is refused with exit status 2 before the work, and the folder of
# the user's files is byte for byte what it was (checksummed before and after each case). compile-model
# replaces only a folder it wrote; --seed -1 and a bad --Xptxas option are refused with exit 2.
#   outputs_test.sh PATH/TO/sparsecc PATH/TO/make_model_fixtures [PATH/TO/sparsecc_bench]
set -uo pipefail
bin=$1
fixtures=$2
bench=${3:-}
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"

w=$tmp/w  # the user's files
mkdir -p "$w" "$tmp/out"
cat >"$w/small.mtx" <<'M'
%%MatrixMarket matrix coordinate real general
3 4 4
1 1 1.5
2 3 -2
3 1 4
3 4 0.25
M
cat >"$w/cell.swc" <<'S'
1 1 0 0 0 5 -1
2 3 10 0 0 1 1
3 3 20 0 0 1 2
S
"$fixtures" "$w/in" >/dev/null || { echo "FAIL: make_model_fixtures"; exit 1; }
expect 0 "" -- compile "$w/small.mtx" --n 4 -o "$w/small.sccb"
expect 0 "" -- prune "$w/small.mtx" --pattern unstructured --sparsity 0.5 -o "$w/p.npy"
echo '{"schema": 1, "records": []}' >"$w/db.json"
echo "not really a bias" >"$w/b.npy"
ln -s small.mtx "$w/link.mtx"
ln "$w/small.mtx" "$w/hard.mtx"
mkfifo "$w/pipe" "$w/pipe.npy" "$w/pipe.hpp" "$w/src.cpp"
ln -s pipe "$w/to_pipe.sccb"
ln -s /dev/null "$w/null.npy"
mkdir -p "$w/folder" "$w/folder.npy" "$w/empty_model"
cp "$w/small.sccb" "$w/bundle.hpp"
cp "$w/small.sccb" "$w/gen.cpp"
# A user's folder with a file named manifest.json (and one whose manifest lists a file beside others).
mkdir -p "$w/mine" "$w/mixed"
echo '{"layers": [], "notes": "mine"}' >"$w/mine/manifest.json"
echo keep >"$w/mine/notes.txt"
printf '{"format": "sparsecc-model-manifest", "version": 1, "layers": [{"name": "a", "file": "a.sccb"}]}\n' \
  >"$w/mixed/manifest.json"
cp "$w/small.sccb" "$w/mixed/a.sccb"
echo keep >"$w/mixed/notes.txt"
# A read-only folder; root writes there anyway, and then that case is skipped.
mkdir -p "$w/ro"
chmod 555 "$w/ro"
ro_enforced=1
if touch "$w/ro/probe" 2>/dev/null; then
  rm -f "$w/ro/probe"
  ro_enforced=0
  echo "skip: read-only folder cases (permission bits do not stop this user)"
fi

# The user's files: names, types, permission bits, sizes and contents.
snapshot() {
  (cd "$w" && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort && find . -type f -exec sha256sum {} + | LC_ALL=C sort)
}
# refused STATUS PATTERN -- ARGS...: expect, and nothing of the user's changed (nor /dev/null).
refused() {
  local before after
  before=$(snapshot)
  expect "$@"
  after=$(snapshot)
  [[ "$before" == "$after" ]] || fail "sparsecc ${*:4} changed the user's files: $(diff <(echo "$before") <(echo "$after") | head -n 6)"
  test -c /dev/null || fail "sparsecc ${*:4} replaced /dev/null"
}
# path_cases OPTION ARGS...: every bad place for the output named by OPTION, the rest of the command
# in ARGS; SUFFIX is the output's file name ending (.sccb, .npy, ...).
path_cases() {
  local opt=$1 suffix=$2
  shift 2
  refused 2 "is a character device"          -- "$@" "$opt" /dev/null
  refused 2 "is a FIFO"                      -- "$@" "$opt" "$w/pipe"
  refused 2 "symbolic link to .*pipe, a FIFO" -- "$@" "$opt" "$w/to_pipe.sccb"
  refused 2 "is a folder"                    -- "$@" "$opt" "$w/folder"
  refused 2 "folder .*nofolder does not exist" -- "$@" "$opt" "$w/nofolder/x$suffix"
  refused 2 "small.mtx is not a folder"      -- "$@" "$opt" "$w/small.mtx/x$suffix"
  refused 2 "the output path is empty"       -- "$@" "$opt" ""
  if ((ro_enforced)); then
    refused 2 "cannot create files in folder .*ro" -- "$@" "$opt" "$w/ro/x$suffix"
  fi
}

# compile: the matrix, --bias and --db are inputs.
refused 2 "is the input .*small.mtx"  -- compile "$w/small.mtx" --n 4 -o "$w/small.mtx"
refused 2 "is the input"              -- compile "$w/small.mtx" --n 4 -o "$w/./small.mtx"
refused 2 "is the input"              -- compile "$w/small.mtx" --n 4 -o "$w/link.mtx"
refused 2 "is the input"              -- compile "$w/link.mtx" --n 4 -o "$w/small.mtx"
refused 2 "is the input"              -- compile "$w/small.mtx" --n 4 -o "$w/hard.mtx"
refused 2 "is the input .*b.npy"      -- compile "$w/small.mtx" --n 4 --bias "$w/b.npy" -o "$w/b.npy"
refused 2 "is the input .*db.json"    -- compile "$w/small.mtx" --n 4 --db "$w/db.json" -o "$w/db.json"
path_cases -o .sccb compile "$w/small.mtx" --n 4
refused 2 "seed.*negative"            -- compile "$w/small.mtx" --n 4 --seed -1 -o "$tmp/out/s.sccb"
refused 2 "Xptxas: the assembler refuses -bogus" -- compile "$w/small.mtx" --n 4 --Xptxas=-bogus -o "$tmp/out/x.sccb"
refused 2 "Xptxas: the assembler refuses -bogus" -- compile "$w/small.mtx" --n 4 --emit cuda --Xptxas=-bogus -o "$tmp/out/x.sccb"
expect 0 "compiled"                   -- compile "$w/small.mtx" --n 4 --Xptxas=-O1 -o "$tmp/out/o1.sccb"
[[ -e "$tmp/out/s.sccb" || -e "$tmp/out/x.sccb" ]] && fail "a refused compile wrote its output"

# hines: the SWC files and --db are inputs.
refused 2 "is the input .*cell.swc"   -- hines "$w/cell.swc" -o "$w/cell.swc"
refused 2 "is the input"              -- hines "$w/cell.swc" --db "$w/db.json" -o "$w/db.json"
path_cases -o .sccb hines "$w/cell.swc"
refused 2 "seed.*negative"            -- hines "$w/cell.swc" --check --seed -1

# prune: the input.
refused 2 "is the input .*p.npy"      -- prune "$w/p.npy" --pattern unstructured --sparsity 0.5 -o "$w/p.npy"
refused 2 "symbolic link to /dev/null, a character device" -- prune "$w/small.mtx" --pattern 2:4 -o "$w/null.npy"
refused 2 "is a FIFO"                 -- prune "$w/small.mtx" --pattern 2:4 -o "$w/pipe.npy"
refused 2 "is a folder"               -- prune "$w/small.mtx" --pattern 2:4 -o "$w/folder.npy"
refused 2 "folder .*nofolder does not exist" -- prune "$w/small.mtx" --pattern 2:4 -o "$w/nofolder/x.npy"
refused 2 "small.mtx is not a folder" -- prune "$w/small.mtx" --pattern 2:4 -o "$w/small.mtx/x.npy"
refused 2 "seed.*negative"            -- prune "$w/small.mtx" --pattern 2:4 --seed -1 -o "$tmp/out/s.npy"

# tune: the database it writes is none of its inputs; -o of --fit / --evaluate is not a database read.
refused 2 "--db .*is the input .*small.mtx" -- tune "$w/small.mtx" --n 4 --db "$w/small.mtx"
refused 2 "--db .*is the input"       -- tune "$w/small.mtx" --n 4 --db "$w/hard.mtx"
refused 2 "--db .*is the input .*b.npy" -- tune "$w/small.mtx" --n 4 --bias "$w/b.npy" --db "$w/b.npy"
refused 2 "--db .*is the input .*cell.swc" -- tune "$w/cell.swc" --db "$w/cell.swc"
refused 2 "--db /dev/null: is a character device" -- tune "$w/small.mtx" --n 4 --db /dev/null
refused 2 "--db .*pipe: is a FIFO"    -- tune "$w/small.mtx" --n 4 --db "$w/pipe"
refused 2 "--db .*folder: is a folder" -- tune "$w/small.mtx" --n 4 --db "$w/folder"
refused 2 "is the input .*db.json"    -- tune --fit --db "$w/db.json" -o "$w/db.json"
refused 2 "is the input .*db.json"    -- tune --evaluate --db "$w/db.json" -o "$w/db.json"
path_cases -o .json tune --fit --db "$w/db.json"
refused 2 "the output path is empty"  -- tune "$w/small.mtx" --n 4 --db ""
refused 2 "seed.*negative"            -- tune "$w/small.mtx" --n 4 --space --seed -1
refused 2 "negative"                  -- tune "$w/small.mtx" --n 4 --space --shortlist -1

# embed: neither the header nor the source beside it is a bundle or the manifest it reads.
refused 2 "is the input .*bundle.hpp" -- embed "$w/bundle.hpp" --name k -o "$w/bundle.hpp"
refused 2 "is the input .*gen.cpp"    -- embed "$w/gen.cpp" --name k -o "$w/gen.hpp"
refused 2 "pipe.hpp: is a FIFO"       -- embed "$w/small.sccb" --name k -o "$w/pipe.hpp"
refused 2 "src.cpp: is a FIFO"        -- embed "$w/small.sccb" --name k -o "$w/src.hpp"
mkdir -p "$w/dir.hpp"
refused 2 "dir.hpp: is a folder"      -- embed "$w/small.sccb" --name k -o "$w/dir.hpp"
refused 2 "folder .*nofolder does not exist" -- embed "$w/small.sccb" --name k -o "$w/nofolder/k.hpp"
refused 2 "small.mtx is not a folder" -- embed "$w/small.sccb" --name k -o "$w/small.mtx/k.hpp"
if ((ro_enforced)); then
  refused 2 "cannot create files in folder .*ro" -- embed "$w/small.sccb" --name k -o "$w/ro/k.hpp"
fi
expect 0 "wrote"                      -- embed "$w/small.sccb" --name k -o "$tmp/out/k.hpp"

# compile-model: never a user's folder, whatever its manifest.json holds; its own output is replaced.
refused 2 "did not write .*not a sparsecc model manifest" -- compile-model "$w/in/model.npz" --n 8 -o "$w/mine"
refused 2 "did not write .*notes.txt"  -- compile-model "$w/in/model.npz" --n 8 -o "$w/mixed"
refused 2 "exists and is not a folder" -- compile-model "$w/in/model.npz" --n 8 -o "$w/in/model.npz"
refused 2 "exists and is not a folder" -- compile-model "$w/in/model.npz" --n 8 -o /dev/null
refused 2 "exists and is not a folder" -- compile-model "$w/in/model.npz" --n 8 -o "$w/pipe"
refused 2 "did not write"             -- compile-model "$w/in/model.npz" --n 8 -o "$w/in"
refused 2 "folder .*nofolder does not exist" -- compile-model "$w/in/model.npz" --n 8 -o "$w/nofolder/m"
refused 2 "small.mtx is not a folder" -- compile-model "$w/in/model.npz" --n 8 -o "$w/small.mtx/m"
refused 2 "the output path is empty"  -- compile-model "$w/in/model.npz" --n 8 -o ""
refused 2 "the output path is empty"  -- embed "$w/small.sccb" --name k -o ""
refused 2 "the output path is empty"  -- prune "$w/small.mtx" --pattern 2:4 -o ""
if ((ro_enforced)); then
  refused 2 "cannot create files in folder .*ro" -- compile-model "$w/in/model.npz" --n 8 -o "$w/ro/m"
fi
expect 0 "wrote 2 bundle"             -- compile-model "$w/in/model.npz" --n 8 -o "$w/empty_model"
grep -q '"n": 8' "$w/empty_model/manifest.json" || fail "compile-model did not fill the empty folder"
expect 0 "wrote 2 bundle"             -- compile-model "$w/in/model.npz" --n 16 -o "$w/empty_model/"
grep -q '"n": 16' "$w/empty_model/manifest.json" || fail "compile-model did not replace its own output"
# A manifest.json beside its earlier output, as an input (--layer-n-file), keeps it.
refused 2 "holds the input"           -- compile-model "$w/in/model.npz" --n 8 --layer-n-file "$w/empty_model/manifest.json" -o "$w/empty_model"
leftovers=$(find "$w" -name '.*.tmp.*' -o -name '.*.old.*' -o -name '*.tmp.*' | wc -l)
[[ $leftovers -eq 0 ]] || fail "temporaries left behind: $(find "$w" -name '*.tmp.*' -o -name '.*.old.*')"

# sparsecc_bench --json: checked before any GPU work.
if [[ -n "$bench" ]]; then
  bin=$bench
  refused 2 "--json /dev/null: is a character device" -- --json /dev/null
  refused 2 "--json .*pipe: is a FIFO"  -- --json "$w/pipe"
  refused 2 "--json .*is the input .*db.json" -- --db "$w/db.json" --json "$w/db.json"
  refused 2 "--json .*nofolder does not exist" -- --json "$w/nofolder/r.json"
  refused 2 "seed.*negative"           -- hines "$w/cell.swc" --seed -1
fi

chmod 755 "$w/ro"
if ((failures)); then
  echo "$failures output check(s) failed"
  exit 1
fi
echo "all output checks passed"
