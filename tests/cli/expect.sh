# Shared by the CLI test scripts (sourced): `bin` names the sparsecc binary, `failures` counts.
#
# expect STATUS PATTERN -- ARGS...: runs sparsecc ARGS, checks the exit status and that the combined
# output matches the extended regex PATTERN.
expect() {
  local want=$1 pattern=$2
  shift 3
  local out rc
  out=$("$bin" "$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want ]] || ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL: sparsecc $* -> exit $rc (want $want), output must match /$pattern/:"
    sed 's/^/    /' <<<"$out" | head -n 20
    failures=$((failures + 1))
  else
    echo "ok:   sparsecc $* -> $rc"
  fi
}
