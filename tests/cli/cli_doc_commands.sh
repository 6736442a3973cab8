#!/bin/bash
# Every `dlperf ...` command line written in bench/*.sh, deploy/*, docs/*.md and README.md parses with the real
# option parser (`dlperf --parse-only`, the tables of src/cli/*.c), so a wrong option name fails here and not in a
# GPU lease (issue 27: bench/gpu.sh's `probe --json` and `data gen --images-per-class` did). Also checks the
# parse-only mode itself (every command and sub-command parses through it and runs nothing) and that the extractor
# (tests/cli/lib/doc_commands.py) finds bad lines in every form the files use, at the right line.
# Not in the sanitizer pass: it checks the documents, not memory (20 s there; the option parser runs under ASan in
# test_core_opts, the fuzz corpora's replay and every other script).
# timeout: 180
set -u
D=${DLPERF:?}
case $D in /*) ;; *) D=$PWD/$D ;; esac
PY=${PYTHON:-/usr/bin/python3}
ROOT=${DLPERF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
X="$ROOT/tests/cli/lib/doc_commands.py"
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/doccmd.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. the parse-only mode: good options exit 0 and run nothing; a bad one exits 2 with the parser's message
mkdir -p "$T/cwd" "$T/home"
cd "$T/cwd" || exit 1
export HOME="$T/home"
cmds=$("$D" --help | awk '/^commands:/ {f=1; next} /^$/ {f=0} f && NF {print $1}')
[ "$(echo "$cmds" | wc -w)" -ge 15 ] || fail "dlperf --help lists too few commands: $cmds"
n=0
for c in $cmds; do
  subs=$("$D" "$c" --help 2>/dev/null | awk '/^commands:/ {f=1; next} /^$/ {f=0} f && NF {print $1}')
  if [ -n "$subs" ] && "$D" "$c" --help | grep -q "^usage: dlperf $c <command>"; then
    list=$(for s in $subs; do echo "$c $s"; done)
  else
    list=$c
  fi
  while read -r line; do
    [ -n "$line" ] || continue
    out=$(timeout 10 "$D" --parse-only $line 2>&1); rc=$?
    if [ $rc = 1 ] && [[ "$out" == *"built without CUDA"* ]]; then echo "note: $line: built without CUDA"; continue; fi
    [ $rc = 0 ] || fail "dlperf --parse-only $line exits $rc (timeout 124 = it ran): $out"
    out=$(DLPERF_PARSE_ONLY=1 timeout 10 "$D" $line --no-such-option 2>&1); rc=$?
    [ $rc = 2 ] && [[ "$out" == *"unknown option --no-such-option"* ]] \
      || fail "DLPERF_PARSE_ONLY=1 dlperf $line --no-such-option: exit $rc, '$out'"
    n=$((n + 1))
  done <<< "$list"
done
w=$(find "$T/cwd" "$T/home" -mindepth 1); [ -z "$w" ] || fail "parse-only runs wrote files: $w"
"$D" --parse-only dist bench stray >/dev/null 2>&1 && fail "dist bench takes no arguments, parse-only accepted one"
"$D" --parse-only gpu nosuch >/dev/null 2>&1 && fail "an unknown sub-command parsed"
echo "ok parse-only: $n commands and sub-commands parse through it, run nothing, refuse an unknown option"

# 2. the extractor finds bad lines in every form (the lines marked BAD, nothing else)
mkdir -p "$T/fx"
cat > "$T/fx/a.sh" <<'EOF'
#!/bin/bash
D=${DLPERF:-$ROOT/build/dlperf}
DL="$B/dlperf"
"$D" train --steps 3 --data synthetic --json "$T/x.json" 2>&1 | tee log
dl "$DL" probe --device cuda --json "$WORK/m.json" || rc=1          # BAD probe has --out
timeout 60 "$DL" data gen --out "$data" --classes 10 \
   --images-per-class 4 --seed 1                                     # BAD (continued line; flagged at its start)
X=$("$D" data gen --per-class 2 | head -1)
Y=$("$D" predict --sytem dgx-a100)                                   # BAD inside $(...)
cmd="$DL train --device cuda --steps 60 --wrkers $NPROC"             # BAD in an assigned string
OMP_NUM_THREADS=2 mpirun -np 2 "$D" dist bench --dist nccl --min-bytes 8 --max-bytes 64M -n 5
"$D" gpu bench --precision "$p" --batch "$B" ${ARGS[@]+"${ARGS[@]}"}
"$D" nn bench --precision fp8                                        # BAD not a choice
cat <<PY
dlperf train --not-checked-in-a-heredoc
PY
echo "dlperf train --not-a-command-just-text"
# prose naming `dlperf train --checkpoint` and `dlperf nn bench --bogus-in-comment` # BAD (the second)
EOF
cat > "$T/fx/b.md" <<'EOF'
Run `dlperf predict --system dgx-a100` or `dlperf predict --sytem x` (BAD) and `dlperf nn` (a group).

```
$ dlperf loadgen --scenario Offline --url http://127.0.0.1:8080/v1/classify \
    --images syn/val --nosuch 1
dlperf loadgen: this is output, not a command --nosuch
```

```sh
dlperf probe --out profile.json [--data DIR|synthetic] [--quick] [--device ref,cpu | cuda] [--threads N]
dlperf gpu bench --batch N --precision P --h2d
dlperf run: resnet50 on a host (output)
dlperf infer --top5 IMAGE --labels FILE --bad-flag
```

    dlperf train --stepz 3
    dlperf loadgen --scenario Server --url ... --images val/
    dlperf      torch    ratio (a table's header: output)
EOF
cat > "$T/fx/c.yaml" <<'EOF'
spec:
  containers:
    - name: a
      image: dlperf:latest
      args: ["serve", "--port", "8080", "--max-batchs", "8"]
    - name: b
      image: dlperf:latest
      command: ["mpirun"]
      args:
        - "-np"
        - "2"
        - "dlperf"
        - "train"
        - "--epochs"
        - "1"
EOF
cat > "$T/fx/Dockerfile" <<'EOF'
# BAD on lines 2, 3 and 8
#   docker run --rm dlperf trian
RUN make build/dlperf && ./build/dlperf version --jsn \
    && true
RUN apt-get install -y make \
    dlperf-is-not-here
ENTRYPOINT ["dlperf"]
CMD ["run", "--quik"]
EOF
( cd "$T/fx" && "$PY" "$X" "$D" a.sh b.md c.yaml Dockerfile ) > "$T/fx.out" 2>&1 && fail "the fixture's bad lines passed: $(cat "$T/fx.out")"
grep '^FAIL' "$T/fx.out" | awk '{print $2}' | sort > "$T/got"
printf '%s\n' a.sh:5 a.sh:6-7 a.sh:9 a.sh:10 a.sh:13 a.sh:18 b.md:1 b.md:4-5 b.md:13 b.md:16 c.yaml:5 Dockerfile:2 Dockerfile:3 Dockerfile:8 | sort > "$T/want"
diff "$T/want" "$T/got" > "$T/diff" || { cat "$T/fx.out"; fail "the extractor flagged other lines than the bad ones: $(cat "$T/diff")"; }
grep -A1 '^FAIL a.sh:5 ' "$T/fx.out" | grep -q 'unknown option --json' || fail "no parser message for a.sh:5: $(cat "$T/fx.out")"
grep -A1 '^FAIL b.md:13 ' "$T/fx.out" | grep -q 'unknown option --bad-flag' || fail "b.md:13's message: $(cat "$T/fx.out")"
grep -q ' 14 do not' "$T/fx.out" || fail "count line: $(tail -1 "$T/fx.out")"
echo "ok extractor: the fixture's 14 bad lines found at their lines (shell, \$(...), strings, comments, markdown blocks, indented and inline, YAML, Dockerfile), the good ones pass"

# 3. the repository's own command lines
cd "$ROOT" || exit 1
"$PY" "$X" "$D" bench/*.sh deploy/* docs/*.md README.md > "$T/repo.out" 2>&1; rc=$?
grep -v '^skip ' "$T/repo.out"
[ $rc = 0 ] || fail "dlperf command lines above do not parse (fix the option names; check them with dlperf <cmd> --help)"
grep -Eq '^[0-9]+ dlperf command lines parse' "$T/repo.out" || fail "no summary line"
[ "$(grep -Eo '^[0-9]+' <(tail -1 "$T/repo.out"))" -ge 100 ] || fail "too few command lines found: $(tail -1 "$T/repo.out")"
echo "PASS"
