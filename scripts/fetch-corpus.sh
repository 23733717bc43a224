#!/usr/bin/env bash
# scripts/fetch-corpus.sh DIR — the training corpus for `make run` / `make test`: the King
# James Bible (public domain, Debian packages bible-kjv + bible-kjv-text) as DIR/kjv.jsonl,
# one {"text": ...} document per chapter (1189), preprocessed with the byte tokenizer into
# DIR/kjv_text_document.{bin,idx}.
# Idempotent and fast when done (both outputs present: returns at once). Every file is made
# under a temporary name and renamed, so an interrupted run leaves nothing half-made.
# Needs ./mtrain (or $MTRAIN) built first. bash + awk only.
set -euo pipefail
dir="${1:-data}"
mtrain="${MTRAIN:-./mtrain}"
prefix="$dir/kjv"
out="${prefix}_text_document"

if [ -s "$out.idx" ] && [ -s "$out.bin" ]; then
  exit 0
fi
if ! command -v bible >/dev/null 2>&1; then
  echo "fetch-corpus: the 'bible' command is missing (packages bible-kjv, bible-kjv-text): run scripts/install-deps.sh" >&2
  exit 1
fi
mkdir -p "$dir"

if [ ! -s "$dir/kjv.jsonl" ]; then
  tmp="$dir/kjv.jsonl.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  # `bible` prints "Book N" after a blank line, then verses "  N text" wrapped at ~80
  # columns (continuation lines start at column 0). One document per chapter:
  # "Book N\n\n1 verse...\n2 verse...", JSON-escaped without relying on awk's
  # gsub backslash rules (they differ between mawk and gawk).
  bible Gen1:1-Rev22:21 | awk '
    function lrepl(s, from, to,    out, i) {
      out = ""
      while ((i = index(s, from)) > 0) {
        out = out substr(s, 1, i - 1) to
        s = substr(s, i + length(from))
      }
      return out s
    }
    function esc(s,    c, i) {
      s = lrepl(s, "\\", "\\\\")
      s = lrepl(s, "\"", "\\\"")
      s = lrepl(s, "\n", "\\n")
      s = lrepl(s, "\t", "\\t")
      s = lrepl(s, "\r", "\\r")
      for (i = 1; i < 32; i++) {
        c = sprintf("%c", i)
        if (index(s, c) > 0) s = lrepl(s, c, sprintf("\\u%04x", i))
      }
      return s
    }
    function flush() {
      if (title != "") printf "{\"text\": \"%s\"}\n", esc(title "\n\n" text)
      title = ""; text = ""
    }
    BEGIN { prev_blank = 1 }
    /^[ \t]*$/ { prev_blank = 1; next }
    {
      line = $0
      if (prev_blank && line !~ /^[ \t]/) {      # chapter heading
        flush(); title = line; prev_blank = 0; next
      }
      prev_blank = 0
      if (line ~ /^[ \t]+[0-9]+ /) {             # a verse starts
        sub(/^[ \t]+/, "", line)
        text = (text == "" ? line : text "\n" line)
      } else {                                   # a wrapped verse continues
        text = text " " line
      }
    }
    END { flush() }
  ' >"$tmp"
  n=$(wc -l <"$tmp")
  if [ "$n" -ne 1189 ]; then
    echo "fetch-corpus: expected 1189 chapters from 'bible', got $n; is bible-kjv-text complete? run scripts/install-deps.sh" >&2
    exit 1
  fi
  mv -f "$tmp" "$dir/kjv.jsonl"
  trap - EXIT
fi

if [ ! -x "$mtrain" ]; then
  echo "fetch-corpus: $mtrain is not built (run make first)" >&2
  exit 1
fi
# preprocess writes *.tmp and renames both files only on success; drop leftovers of a
# killed run first.
rm -f "$out.bin.tmp" "$out.idx.tmp"
"$mtrain" preprocess --input "$dir/kjv.jsonl" --output-prefix "$prefix" --tokenizer byte --append-eod
