#!/bin/bash
# Lists the C functions longer than a limit, longest first: "LINES FILE:START NAME" (lines from the line of the
# name to the closing brace). Usage: tools/long-functions.sh [LIMIT (default 150)] [DIR (default src)].
# Uses universal-ctags' end: field; exits 1 when any function is over the limit.
set -eu
LIMIT=${1:-150}
DIR=${2:-src}
command -v ctags >/dev/null || { echo "long-functions: needs universal-ctags (apt install universal-ctags)" >&2; exit 2; }
find "$DIR" -name '*.c' -print0 | sort -z |
  xargs -0 ctags -x --c-kinds=f --fields=+ne --_xformat='%{line} %{end} %{input} %{name}' |
  awk -v lim="$LIMIT" '{ n = $2 - $1 + 1; if (n > lim) printf "%5d %s:%d %s\n", n, $3, $1, $4 }' |
  sort -rn >"${TMPDIR:-/tmp}/long-functions.$$"
cat "${TMPDIR:-/tmp}/long-functions.$$"
n=$(wc -l <"${TMPDIR:-/tmp}/long-functions.$$")
rm -f "${TMPDIR:-/tmp}/long-functions.$$"
echo "$n function(s) over $LIMIT lines in $DIR"
[ "$n" -eq 0 ]
