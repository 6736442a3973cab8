#!/bin/sh
# tools/gen-man.sh DLPERF > dlperf.1 — the man page, generated from the options tables: every command's (and
# sub-command's) --help, which core/opts prints from the table the command parses with. `make man` and
# `make install` run it, so the page never drifts from the options.
set -eu
DLPERF=${1:?usage: gen-man.sh path/to/dlperf}
VERSION=$("$DLPERF" --version | sed -n '1s/^dlperf //p')
DATE=$(date -u +%Y-%m-%d)

# troff-escape: backslashes, leading dots and quotes, and dashes (so they print as ASCII hyphens)
esc() { sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\([.']\)/\\\\\&\1/"; }

# the commands listed in a dispatcher's help ("commands:" then "  name  summary")
commands() { awk '/^commands:/ {on=1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on=0}'; }

# One command's help as troff: the usage paragraph, then each option as a tagged paragraph.
leaf() {
    awk -v name="$1" '
    function esc(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); return s }
    BEGIN { print ".SS \"" esc(name) "\""; print ".nf"; mode = "usage" }
    mode == "usage" && /^options:/ { print ".fi"; mode = "opts"; next }
    mode == "usage" { line = esc($0); if (line ~ /^[.'"'"']/) line = "\\&" line; print line; next }
    mode == "opts" && /^ +-/ {
        s = $0; sub(/^ +/, "", s)
        # the left column: "-x, --name META" (META has no spaces); the help follows after spaces
        if (match(s, /^(-[A-Za-z0-9], )?--[A-Za-z0-9-]+( [^ ]+)?/)) {
            left = substr(s, 1, RLENGTH); right = substr(s, RLENGTH + 1); sub(/^ +/, "", right)
        } else { left = s; right = "" }
        print ".TP"; print "\\fB" esc(left) "\\fR"; if (right != "") print esc(right)
        next
    }
    mode == "opts" && /^ +[^ ]/ { s = $0; sub(/^ +/, "", s); print esc(s) }'
}

cat <<HEAD
.TH DLPERF 1 "$DATE" "dlperf $VERSION" "User Commands"
.SH NAME
dlperf \\- ResNet training and inference benchmarks, input pipeline, monitor, serving, load generator, performance model
.SH SYNOPSIS
.B dlperf
[\\fB\\-v\\fR] \\fIcommand\\fR [\\fIoptions\\fR]
.br
.B dlperf \\-\\-version
.SH DESCRIPTION
HEAD
"$DLPERF" --help | awk '/^commands:/ {on=1; next} on && /^  [a-z]/ {n=$1; $1=""; sub(/^ +/, ""); print ".TP\n\\fB" n "\\fR\n" $0}' | sed 's/-/\\-/g'
cat <<'MID'
.PP
Options have one meaning across commands: \fB\-b\fR \-\-batch, \fB\-d\fR \-\-data, \fB\-j\fR \-\-json, \fB\-m\fR
\-\-model, \fB\-o\fR \-\-out, \fB\-p\fR \-\-precision, \fB\-s\fR \-\-steps, \fB\-t\fR \-\-threads, \fB\-w\fR
\-\-workers. Every option that names a file written takes \fB\-\fR for the standard output (what the command prints
for people then goes to the standard error). Every command takes \fB\-v\fR (\fB\-\-verbose\fR): error messages then
also name the source places they passed through.
.SH COMMANDS
MID
for c in $("$DLPERF" --help | commands); do
    out=$("$DLPERF" "$c" --help 2>&1 || true)
    if printf '%s\n' "$out" | grep -q '^commands:'; then
        for s in $(printf '%s\n' "$out" | commands); do
            "$DLPERF" "$c" "$s" --help 2>&1 | leaf "dlperf $c $s" || true
        done
    else
        printf '%s\n' "$out" | leaf "dlperf $c"
    fi
done
cat <<'TAIL'
.SH ENVIRONMENT
.TP
.B DLPERF_CATALOG
the catalog directory (default: \fIPREFIX\fR/share/dlperf/catalog beside the installed binary, or catalog/ of
the source tree)
.TP
.B DLPERF_CACHE
the cache directory (synthetic datasets, measured peaks)
.TP
.B DLPERF_LOG
\fBdebug\fR: debug messages and error locations; \fBquiet\fR: warnings and errors only
.SH EXIT STATUS
0 on success, 2 for a usage error (unknown command or option, bad value), 1 for other failures.
.SH FILES
.I PREFIX/share/dlperf/catalog
GPUs, CPUs, systems and published throughput, with sources.
.SH SEE ALSO
The README and docs/ of the source tree.
TAIL
