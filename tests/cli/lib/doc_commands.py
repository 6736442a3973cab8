#!/usr/bin/env python3
"""Every `dlperf ...` command line written in the given files, run through `dlperf --parse-only` (the real option
tables of src/cli/*.c): prints file:line, the command and the parser's message for each one that does not parse.

Usage: doc_commands.py DLPERF FILE...      (exit 0: all parse; 1: some do not; 2: usage)
       doc_commands.py --list FILE...      (print what would be checked, run nothing)

What counts as a command line:
  * shell (*.sh, Dockerfile): every simple command whose program (after assignments and wrappers such as `dl`,
    `timeout`, `time`, `env`, `mpirun`, `docker run`) is dlperf: `dlperf`, a path ending in /dlperf, or a variable
    the file assigns such a path to (and $DLPERF); inside $(...) and in assigned strings (cmd="$DL train ...") too;
    backslash continuations joined; heredoc bodies skipped; in comments, `backquoted` spans only.
  * markdown: lines of code blocks (only the `$ ` prompt lines when a block has prompts; others are output) and
    inline code spans; usage synopses ([--opt X] [a | b]) take their first alternative.
  * YAML (Kubernetes manifests): a container's command + args (args alone when the image's entrypoint is dlperf).
Values the file does not spell out (shell variables, $(...), FILE, N, <x> in docs) become placeholders: "1", or the
first choice when the parser says "'1' is not one of a|b|c". "${ARGS[@]}" and "..." are dropped. A placeholder
left over as a positional argument is not an error; a real stray argument is, except for the commands that take
positional arguments (POSITIONAL).
"""
import json
import os
import re
import subprocess
import sys

POSITIONAL = {"catalog", "report", "infer", "monitor"}
WRAPPERS = {"dl", "time", "env", "exec", "command", "nice", "nohup", "timeout", "mpirun", "mpiexec", "srun",
            "taskset", "numactl", "stdbuf", "setsid", "sudo", "valgrind", "compute-sanitizer", "gdb"}
KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time", "function"}
CTRL = {"|", "||", "&&", ";", "&", "(", ")", ";;", "\n", "|&"}
PH = "\x00PH"  # marks a placeholder word
# Explicit skips: (file suffix, regex on the command text, why). Keep this list small.
ALLOW = [
]


class Word:
    def __init__(self, text, off, var=False, drop=False):
        self.text, self.off, self.var, self.drop = text, off, var, drop


def match_paren(s, i):
    """s[i] == '(' of a '$(' : index of its closing ')', quotes respected."""
    depth, q = 0, None
    while i < len(s):
        c = s[i]
        if q:
            if c == "\\" and q == '"':
                i += 1
            elif c == q:
                q = None
        elif c in "'\"":
            q = c
        elif c == "\\":
            i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(s) - 1


def tokenize(s, base, subs):
    """Shell words and operators of s (offsets + base). Command substitutions go to subs as (text, offset)."""
    out, i, n = [], 0, len(s)
    while i < n:
        c = s[i]
        if c in " \t":
            i += 1
            continue
        if c == "\n":
            out.append(Word("\n", base + i))
            i += 1
            continue
        if c == "#":  # a comment to the end of the line
            while i < n and s[i] != "\n":
                i += 1
            continue
        m = re.match(r"\d*(>>|>&|<&|&>|<<<|<<-|<<|>\||>|<)", s[i:])
        if m:  # a redirection: the operator and its target go
            i += m.end()
            while i < n and s[i] in " \t":
                i += 1
            w = read_word(s, i, base, subs)
            i = w[1]
            continue
        m = re.match(r"\|\||&&|;;|\|&|[|;&()]", s[i:])
        if m:
            out.append(Word(m.group(0), base + i))
            i += m.end()
            continue
        (text, j, var, drop) = read_word(s, i, base, subs)
        out.append(Word(text, base + i, var, drop))
        i = j
    return out


def read_word(s, i, base, subs):
    text, var, drop, n = [], False, False, len(s)
    start = i
    while i < n and s[i] not in " \t\n|;&()<>":
        c = s[i]
        if c == "\\" and i + 1 < n:
            text.append(s[i + 1])
            i += 2
        elif c == "'":
            j = s.find("'", i + 1)
            j = n if j < 0 else j
            text.append(s[i + 1:j])
            i = j + 1
        elif c == '"':
            i += 1
            while i < n and s[i] != '"':
                if s[i] == "\\" and i + 1 < n:
                    text.append(s[i + 1])
                    i += 2
                elif s.startswith("$(", i):
                    j = match_paren(s, i + 1)
                    subs.append((s[i + 2:j], base + i + 2))
                    text.append(PH)
                    var = True
                    i = j + 1
                elif s[i] == "$":
                    t, i, d = read_var(s, i)
                    text.append(t)
                    var, drop = True, drop or d
                else:
                    text.append(s[i])
                    i += 1
            i += 1
        elif s.startswith("$(", i):
            j = match_paren(s, i + 1)
            subs.append((s[i + 2:j], base + i + 2))
            text.append(PH)
            var = True
            i = j + 1
        elif c == "`":
            j = s.find("`", i + 1)
            j = n if j < 0 else j
            subs.append((s[i + 1:j], base + i + 1))
            text.append(PH)
            var = True
            i = j + 1
        elif c == "$":
            t, i, d = read_var(s, i)
            text.append(t)
            var, drop = True, drop or d
        else:
            text.append(c)
            i += 1
    return ("".join(text), i if i > start else i + 1, var, drop)


def read_var(s, i):
    """$NAME, ${...}, $1, $@: returns ('$NAME' marker text, end, is an array/all-arguments expansion)."""
    if s.startswith("${", i):
        depth, j = 0, i + 1
        while j < len(s):
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        inner = s[i + 2:j]
        name = re.match(r"[#!]?(\w*)", inner).group(1)
        return ("$" + name, j + 1, "[@]" in inner or "[*]" in inner or name in ("@", "*"))
    m = re.match(r"\$(\w+|[@*#?$!-])", s[i:])
    if not m:
        return ("$", i + 1, False)
    return ("$" + m.group(1), i + m.end(), m.group(1) in ("@", "*"))


class Checker:
    def __init__(self, dlperf):
        self.dlperf = dlperf
        self.found = []  # (file, line, text, argv as list of (value, is_placeholder)), origin)

    def line_of(self, lines_at, off):
        lo, hi = 0, len(lines_at) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if lines_at[mid] <= off:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    # ---- shell ----
    def shell(self, path, src, lines_at, dl_vars, code, base, origin, md=False):
        subs = []
        words = tokenize(code, base, subs)
        for text, off in subs:
            self.shell(path, src, lines_at, dl_vars, text, off, origin, md)
        cmd = []
        for w in words + [Word("\n", len(src))]:
            if w.text in CTRL and not w.var:
                self.simple(path, src, lines_at, dl_vars, cmd, origin, md)
                cmd = []
            else:
                cmd.append(w)

    def is_dl(self, w, dl_vars):
        t = w.text
        if not w.var:
            return t == "dlperf" or t.endswith("/dlperf")
        if re.fullmatch(r"\$(\w+)", t) and t[1:] in dl_vars:
            return True
        return t.endswith("/dlperf")

    def simple(self, path, src, lines_at, dl_vars, cmd, origin, md):
        i = 0
        while i < len(cmd) and (cmd[i].text in KEYWORDS and not cmd[i].var):
            i += 1
        while i < len(cmd) and re.match(r"^[A-Za-z_]\w*(\[[^]]*\])?\+?=", cmd[i].text):
            # an assigned string that is a dlperf command line: cmd="$DL train ..."
            raw = src[cmd[i].off:]
            mm = re.match(r"[A-Za-z_]\w*\+?=\"([^\"]*)\"", raw)
            if mm and re.match(r"\s*(\"?\$\{?(\w+)|\S*dlperf\b)", mm.group(1)):
                first = re.match(r"\s*\"?\$\{?(\w+)", mm.group(1))
                if (first and first.group(1) in dl_vars) or re.match(r"\s*\S*/?dlperf\s", mm.group(1)):
                    self.shell(path, src, lines_at, dl_vars, mm.group(1), cmd[i].off + len(mm.group(0)) - len(mm.group(1)) - 1, origin, md)
            i += 1
        if i >= len(cmd):
            return
        start = None
        if self.is_dl(cmd[i], dl_vars):
            start = i
        elif not cmd[i].var and (cmd[i].text in WRAPPERS or (cmd[i].text == "docker" and i + 1 < len(cmd) and cmd[i + 1].text == "run")):
            for j in range(i + 1, len(cmd)):
                if self.is_dl(cmd[j], dl_vars) or (cmd[i].text == "docker" and cmd[j].text == "dlperf"):
                    start = j
                    break
        if start is None:
            return
        args = []
        for w in cmd[start + 1:]:
            if w.drop:
                continue
            if w.text in ("...", "…"):  # elided: a value (`--url ...`) or more options; a positional is no error
                args.append(("...", True))
                continue
            ph = w.var or PH in w.text or (md and is_md_placeholder(w.text))
            args.append((w.text, ph))
        line = self.line_of(lines_at, cmd[start].off)
        end = self.line_of(lines_at, cmd[-1].off)
        text = " ".join(["dlperf"] + [("<" + a + ">" if p else a).replace(PH, "$(..)") for a, p in args])
        self.found.append((path, line, end, text, args, origin, md))

    # ---- files ----
    def file(self, path):
        src = open(path, encoding="utf-8", errors="replace").read()
        lines_at = [0] + [m.end() for m in re.finditer("\n", src)]
        name = os.path.basename(path)
        if path.endswith(".md"):
            return self.markdown(path, src, lines_at)
        if path.endswith((".yaml", ".yml")):
            self.yaml(path, src)
            return self.comments(path, src, lines_at, "#")
        dl_vars = {"DLPERF"}
        for m in re.finditer(r"(?m)^\s*(?:export\s+|local\s+)?(\w+)=(\S+)", src):
            v = m.group(2).strip("\"'")
            if re.search(r"(^|/)dlperf\}?$", v) or re.match(r"\$\{?DLPERF\b", v):
                dl_vars.add(m.group(1))
        self.shell_file(path, src, lines_at, dl_vars, name == "Dockerfile")
        if name == "Dockerfile":  # ENTRYPOINT ["dlperf"] and CMD ["run", ...]: the image's default command line
            ep = re.search(r'(?m)^ENTRYPOINT\s+(\[.*\])\s*$', src)
            cm = re.search(r'(?m)^CMD\s+(\[.*\])\s*$', src)
            if ep and cm and re.search(r'(^|/)dlperf$', (json.loads(ep.group(1)) or [""])[-1]):
                args = [(a, False) for a in json.loads(cm.group(1))]
                ln = src[:cm.start()].count("\n") + 1
                self.found.append((path, ln, ln, " ".join(["dlperf"] + [a for a, _ in args]), args, "CMD", False))
        self.comments(path, src, lines_at, "#")

    def shell_file(self, path, src, lines_at, dl_vars, dockerfile):
        # blank out heredoc bodies and comment text (kept the same length so offsets stay), then tokenize it whole
        lines = src.split("\n")
        out, hd, cont = [], None, False
        for ln in lines:
            was_cont, cont = cont, ln.rstrip().endswith("\\")
            if hd is not None:
                out.append(" " * len(ln))
                if ln.strip() == hd:
                    hd = None
                continue
            m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", ln)
            if m and not ln.lstrip().startswith("#"):
                hd = m.group(1)
            if dockerfile and not was_cont:
                m2 = re.match(r"\s*(RUN|CMD|ENTRYPOINT)\s+(.*)", ln)
                if not m2:
                    out.append(" " * len(ln))
                    continue
                if m2.group(1) == "ENTRYPOINT" or m2.group(2).lstrip().startswith("["):
                    out.append(" " * len(ln))
                    continue
                ln = " " * m2.start(2) + m2.group(2)
            out.append(ln)
        code = "\n".join(out)
        code = re.sub(r"\\\n", "  ", code)  # continuations: same length, offsets kept
        self.shell(path, src, lines_at, dl_vars, code, 0, "code")

    def comments(self, path, src, lines_at, mark):
        """`backquoted` spans in runs of comment lines (a span may cross lines)."""
        lines = src.split("\n")
        i = 0
        while i < len(lines):
            if not lines[i].lstrip().startswith(mark):
                i += 1
                continue
            j = i
            buf, offs = [], []
            while j < len(lines) and lines[j].lstrip().startswith(mark):
                body_at = lines[j].index(mark) + len(mark)
                ex = re.match(r"\s{2,}((\S+=\S+\s+)*(time\s|mpirun\s[^`]*|docker run\s[^`]*)?\S*dlperf\s[^`]*)$",
                              lines[j][body_at:])
                if ex:  # an example command line, indented in the comment: `#   docker run --rm dlperf run`
                    self.md_code(path, src, lines_at, ex.group(1), lines_at[j] + body_at + ex.start(1), "comment example")
                for k, ch in enumerate(lines[j][body_at:] + " "):
                    buf.append(ch)
                    offs.append(lines_at[j] + body_at + k)
                j += 1
            self.spans(path, src, lines_at, "".join(buf), offs, "comment")
            i = j

    def spans(self, path, src, lines_at, text, offs, origin):
        for m in re.finditer(r"(`+)(.+?)\1", text, re.S):
            span = m.group(2)
            if not re.match(r"\s*(\w+=\S+\s+)*((time|mpirun|env)\b[^`]*?)?\bdlperf\s", span + " "):
                continue
            self.md_code(path, src, lines_at, span, offs[m.start(2)], origin, offs[m.start(2):m.end(2)])

    def md_code(self, path, src, lines_at, code, off, origin, offmap=None):
        code = desynopsis(code)
        code = re.sub(r"<([\w:., -]+)>", lambda m: "PH_" + re.sub(r"\W", "_", m.group(1)), code)
        if offmap is not None:  # spans: put the text at its real offset's line (single line of text)
            code = code.replace("\n", " ")
        self.shell(path, src, lines_at, {"DLPERF"}, code, off, origin, md=True)

    def block(self, path, src, lines_at, block, at0, origin):
        """Lines of a code block: with `$ ` prompts, only the prompt lines (the rest is output); else lines that
        start with dlperf (marked "output?": a first word that is no dlperf command is output, not a command)."""
        prompts = any(re.match(r"\s*\$ ", b) for b in block)
        k = 0
        while k < len(block):
            ln, at = block[k], at0 + k
            while ln.endswith("\\") and k + 1 < len(block):
                k += 1
                ln = ln[:-1] + " " + block[k].lstrip()
            k += 1
            body = ln
            if prompts:
                mm = re.match(r"\s*\$ (.*)", ln)
                if not mm:
                    continue
                body = mm.group(1)
            if not re.match(r"\s*(\w+=\S+\s+)*((time|mpirun|env)\b.*?)?\bdlperf\s", body + " "):
                continue
            self.md_code(path, src, lines_at, body, lines_at[at], origin if prompts else origin + ", output?")

    def markdown(self, path, src, lines_at):
        lines = src.split("\n")
        i = 0
        while i < len(lines):
            m = re.match(r"\s*(```+|~~~+)", lines[i])
            if m:  # a fenced code block
                fence = m.group(1)
                j = i + 1
                while j < len(lines) and not lines[j].lstrip().startswith(fence):
                    j += 1
                self.block(path, src, lines_at, lines[i + 1:j], i + 1, "code block")
                i = j + 1
                continue
            if re.match(r"( {4}|\t)\S", lines[i]) and (i == 0 or not lines[i - 1].strip()):
                j = i  # an indented code block: after a blank line, 4 spaces in, to the next line less indented
                while j < len(lines) and (re.match(r"( {4}|\t)", lines[j]) or not lines[j].strip()):
                    j += 1
                self.block(path, src, lines_at, lines[i:j], i, "indented code")
                i = j
                continue
            # inline code: pair backquotes on the paragraph's lines (spans do not cross blank lines)
            j = i
            while j < len(lines) and lines[j].strip() and not re.match(r"\s*(```+|~~~+)", lines[j]):
                j += 1
            j = max(j, i + 1)
            buf, offs = [], []
            for k in range(i, j):
                for c, ch in enumerate(lines[k] + "\n"):
                    buf.append(ch)
                    offs.append(lines_at[k] + c)
            self.spans(path, src, lines_at, "".join(buf), offs, "inline code")
            i = j

    def yaml(self, path, src):
        try:
            import yaml
        except ImportError:
            print("note: no PyYAML: %s's container commands not checked" % path)
            return
        for doc in yaml.compose_all(src):
            self.yaml_node(path, doc)

    def yaml_node(self, path, node):
        import yaml
        if isinstance(node, yaml.MappingNode):
            keys = {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}
            if "image" in keys and ("args" in keys or "command" in keys):
                argv = []
                for key in ("command", "args"):
                    v = keys.get(key)
                    if isinstance(v, yaml.SequenceNode):
                        argv += [(x.value, x.start_mark.line + 1) for x in v.value if isinstance(x, yaml.ScalarNode)]
                if "command" not in keys and re.match(r"dlperf(:|$)", keys["image"].value or ""):
                    argv = [("dlperf", keys["args"].start_mark.line + 1)] + argv
                for k, (a, ln) in enumerate(argv):
                    if a == "dlperf" or a.endswith("/dlperf"):
                        args = [(x, bool(re.search(r"\$\(|\$\{", x))) for x, _ in argv[k + 1:]]
                        text = " ".join(["dlperf"] + [x for x, _ in args])
                        self.found.append((path, ln, argv[-1][1], text, args, "container args", False))
                        break
            for _, v in node.value:
                self.yaml_node(path, v)
        elif isinstance(node, yaml.SequenceNode):
            for v in node.value:
                self.yaml_node(path, v)

    # ---- running the parser ----
    def commands(self):
        if not hasattr(self, "_cmds"):
            r = subprocess.run([self.dlperf, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            body = r.stdout.split("commands:", 1)[-1].split("\n\n", 1)[0]
            self._cmds = {l.split()[0] for l in body.split("\n") if l.strip()}
        return self._cmds

    def parse(self, args):
        argv = [a if not p else "1" for a, p in args]
        for _ in range(6):
            r = subprocess.run([self.dlperf, "--parse-only"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, DLPERF_LOG="quiet"))
            m = re.search(r"option --([\w-]+): '1' is not one of (\S+)", r.stderr)
            if r.returncode != 0 and m:  # a placeholder where a choice is wanted: the first choice
                k = next((k for k in range(1, len(argv)) if args[k][1] and argv[k] == "1" and
                          (argv[k - 1] == "--" + m.group(1) or argv[k - 1].startswith("-") and not argv[k - 1].startswith("--"))), None)
                if k is not None:
                    argv[k] = m.group(2).split("|")[0]
                    continue
            return r.returncode, r.stderr, argv
        return r.returncode, r.stderr, argv


def is_md_placeholder(t):
    return bool(re.fullmatch(r"(PH_\w*|[A-Z][A-Z0-9_]*([,.:/-][A-Z0-9_.]*)*|\$\w+)", t))


def desynopsis(s):
    """Usage synopsis to one command: [--a X | --b] -> --a X; (x | y) -> x; DIR|synthetic -> DIR; X... -> X."""
    if not re.search(r"\[-|\(-|\s\|\s|\[options\]", s):
        return s
    s = s.replace("[options]", "")
    for _ in range(10):
        t = re.sub(r"[\[(]([^\[\]()]*)[\])]", lambda m: " " + m.group(1).split(" | ")[0].split("|")[0] + " "
                   if m.group(0)[0] == "(" or m.group(1).lstrip().startswith("-") else m.group(1), s)
        if t == s:
            break
        s = t
    s = re.sub(r"(\S+?)\|\S+", r"\1", s)
    return re.sub(r"\.\.\.", "", s)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    list_only = argv[1] == "--list"
    ck = Checker(argv[1])
    for f in argv[2:]:
        ck.file(f)
    bad = skipped = ok = 0
    no_cuda = None
    for path, line, end, text, args, origin, md in ck.found:
        where = "%s:%d%s" % (path, line, "-%d" % end if end != line else "")
        allow = next((why for suf, rx, why in ALLOW if path.endswith(suf) and re.search(rx, text)), None)
        if allow:
            print("skip %s  %s  (allow-list: %s)" % (where, text, allow))
            skipped += 1
            continue
        glob = 0
        while glob < len(args) and args[glob][0] in ("-v", "--verbose", "--parse-only"):
            glob += 1  # options before the command
        cmd = args[glob] if glob < len(args) else None
        if cmd is None or (md and (cmd[1] or not re.fullmatch(r"-[-\w]+|[a-z][a-z-]*", cmd[0]))):
            if md and cmd is not None:  # prose or output ("dlperf X.Y.Z", "dlperf run: ...", "dlperf <command>")
                print("skip %s  %s  (not a command line: prose, output or a placeholder command)" % (where, text))
                skipped += 1
            continue
        if not list_only and origin.endswith("output?") and cmd[0] not in ck.commands() and not cmd[0].startswith("-"):
            print("skip %s  %s  (output in a code block: '%s' is no dlperf command)" % (where, text, cmd[0]))
            skipped += 1
            continue
        if list_only:
            print("%s  [%s]  %s" % (where, origin, text))
            continue
        rc, err, used = ck.parse(args)
        msg = " / ".join(l for l in err.strip().split("\n") if l.strip() and not l.startswith("parse-only:")
                         and not l.startswith(("usage:", "commands:", "  ")))
        m = re.search(r"option (--[\w-]+) needs a value", err)
        if rc != 0 and md and m and args[-1][0] == m.group(1):  # prose naming an option (`train --checkpoint`)
            rc, err, used = ck.parse(args + [("1", True)])
            msg = " / ".join(l for l in err.strip().split("\n") if l.startswith("error"))
        if rc != 0 and "built without CUDA" in err:
            no_cuda = no_cuda or where
            skipped += 1
            continue
        if rc == 2 and md and len(args) == 1 and ("usage: dlperf %s <command>" % args[0][0]) in err:
            print("skip %s  %s  (a command group named in prose)" % (where, text))
            skipped += 1
            continue
        if rc == 2 and re.search(r"^error: unexpected argument '(1|\.\.\.)' \(see --help\)$", msg) and any(p for _, p in args):
            rc = 0  # dlp_cli_parse's check, after every option parsed: a placeholder left over as a positional
        stray = [a for a in re.findall(r"parse-only: argument '(.*)'", err)]
        real = [a for a in stray if a not in ("1",) and not a.startswith(PH)]
        real = [a for a in real if a not in [x for x, p in args if p]]
        if rc == 0 and real and args[0][0] not in POSITIONAL:
            rc, msg = 2, "unexpected argument '%s' (the command takes no arguments besides its options)" % real[0]
        if rc != 0 and re.search(r"unknown command '(1|\.\.\.)'", err) and any(p for _, p in args):
            print("skip %s  %s  (a placeholder sub-command)" % (where, text))
            skipped += 1
            continue
        m = re.search(r"unexpected argument '([^']*)'|unknown command '([^']*)'", msg)
        if rc != 0 and origin.endswith("output?") and m and re.fullmatch(r"[A-Za-z][A-Za-z,:()'-]*", m.group(1) or m.group(2)):
            # a code block without prompts: words after the command are a description or output, not arguments
            print("skip %s  %s  (a code block's text, not a command line: %s)" % (where, text, msg))
            skipped += 1
            continue
        if rc != 0:
            bad += 1
            print("FAIL %s  [%s]  %s\n     -> %s" % (where, origin, text, msg or "exit %d" % rc))
        else:
            ok += 1
    if list_only:
        return 0
    if no_cuda:
        print("note: this dlperf is built without CUDA: `dlperf gpu ...` lines were not checked (first: %s)" % no_cuda)
    print("%d dlperf command lines parse, %d do not, %d skipped (prose, output, allow-list)" % (ok, bad, skipped))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
