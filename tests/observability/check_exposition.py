#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_exposition.py - a strict checker of the Prometheus text exposition
format (version 0.0.4), for what `fencelock metrics` and fencelockd
--metrics-file write.

Usage: check_exposition.py [--dump] [--require-prefix P] [FILE]

Reads FILE (or stdin), and exits 0 if it is valid, else 1 with one
"line N: problem" message per problem on stderr.  With --dump it prints, if
valid, one JSON object: {"families": {name: {"type": T, "help": H}},
"samples": [{"name": N, "family": F, "labels": {...}, "value": "V"}]} with
label values and HELP texts unescaped, for tests to look values up.

What is checked, after https://prometheus.io/docs/instrumenting/exposition_formats/:
- the input is valid UTF-8 and ends in a line feed (unless empty);
- each line is empty, a comment, a HELP line, a TYPE line or a sample;
- metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
  [a-zA-Z_][a-zA-Z0-9_]* and do not start with __ (reserved);
- label values are quoted, with no escapes but \\\\, \\" and \\n;
- HELP texts have no escapes but \\\\ and \\n;
- TYPE is counter, gauge, histogram, summary or untyped;
- a family has at most one HELP and one TYPE line, both before its first
  sample; all the lines of a family (HELP, TYPE, samples) are together;
- _bucket, _count and _sum samples belong to the histogram or summary of
  that base name (_bucket only to a histogram);
- no label name repeats within a sample, and no series (name and label set)
  appears twice;
- values are floats as Go's ParseFloat reads them in decimal (1, -2.5, 1e3,
  .5) or NaN, +Inf, -Inf; timestamps are 64-bit integers;
- counters are not negative and not NaN.
Stricter than the format: raw control characters (other than the tab
between tokens) are refused anywhere, so a label value must escape them.
"""
import json
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
SPECIAL = {"NaN", "+Inf", "-Inf", "Inf", "+inf", "-inf", "inf", "nan"}
INT64 = re.compile(r"-?[0-9]+$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
BLANK = " \t"


class Problem(Exception):
    pass


def unescape(text, allowed, what):
    """Resolve the escapes of text; allowed maps escape letters to values."""
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text) or text[i + 1] not in allowed:
                bad = text[i:i + 2]
                raise Problem("%s: invalid escape %r (only %s)" %
                              (what, bad, ", ".join("\\" + k for k in allowed)))
            out.append(allowed[text[i + 1]])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def skip_blanks(line, i):
    while i < len(line) and line[i] in BLANK:
        i += 1
    return i


def parse_labels(line, i):
    """line[i] is '{'; returns (labels, index after '}')."""
    labels = {}
    i += 1
    while True:
        i = skip_blanks(line, i)
        if i < len(line) and line[i] == "}":
            return labels, i + 1
        m = LABEL.match(line, i)
        if not m:
            raise Problem("bad label name at column %d: %r" % (i + 1, line[i:i + 20]))
        name = m.group(0)
        if name.startswith("__"):
            raise Problem("label name %r is reserved (starts with __)" % name)
        if name in labels:
            raise Problem("label %r given twice" % name)
        i = skip_blanks(line, m.end())
        if i >= len(line) or line[i] != "=":
            raise Problem("expected '=' after label %r" % name)
        i = skip_blanks(line, i + 1)
        if i >= len(line) or line[i] != '"':
            raise Problem("label %r: value is not quoted" % name)
        j = i + 1
        raw = []
        while True:
            if j >= len(line):
                raise Problem("label %r: unterminated value" % name)
            ch = line[j]
            if ch == "\\":
                raw.append(line[j:j + 2])
                j += 2
                continue
            if ch == '"':
                break
            if ch == "\t":
                raise Problem("label %r: raw control character U+0009 in the value" % name)
            raw.append(ch)
            j += 1
        labels[name] = unescape("".join(raw), {"\\": "\\", '"': '"', "n": "\n"},
                                "label %r" % name)
        i = skip_blanks(line, j + 1)
        if i < len(line) and line[i] == ",":
            i += 1
            continue
        if i < len(line) and line[i] == "}":
            return labels, i + 1
        raise Problem("expected ',' or '}' in the labels at column %d" % (i + 1))


def parse_value(text):
    if text in SPECIAL or FLOAT.match(text):
        return float(text.replace("Inf", "inf"))
    raise Problem("value %r is not a float" % text)


class Checker:
    def __init__(self, prefix=None):
        self.prefix = prefix
        self.families = {}  # name -> {"type", "help", "samples"}
        self.current = None
        self.finished = set()
        self.series = set()
        self.samples = []

    def family(self, name):
        return self.families.setdefault(name, {"type": None, "help": None, "samples": 0})

    def enter(self, name):
        """The next line belongs to family name: families stay together."""
        if name == self.current:
            return
        if name in self.finished:
            raise Problem("lines of family %r are not together (it appeared before)" % name)
        if self.current is not None:
            self.finished.add(self.current)
        self.current = name

    def family_of(self, name):
        if name in self.families and self.families[name]["type"] is not None:
            return name
        for suffix, kinds in (("_bucket", ("histogram",)), ("_count", ("histogram", "summary")),
                              ("_sum", ("histogram", "summary"))):
            if name.endswith(suffix):
                base = name[: -len(suffix)]
                if base in self.families and self.families[base]["type"] in kinds:
                    return base
        return name

    def check_name(self, name):
        if not NAME.fullmatch(name):
            raise Problem("bad metric name %r" % name)
        if self.prefix and not name.startswith(self.prefix):
            raise Problem("metric name %r does not start with %r" % (name, self.prefix))

    def comment(self, line):
        i = skip_blanks(line, 1)
        m = re.compile(r"(HELP|TYPE)(?=[ \t])").match(line, i)
        if not m:
            if line[i:i + 4] in ("HELP", "TYPE") and line[i:].strip() in ("HELP", "TYPE"):
                raise Problem("%s line without a metric name" % line[i:i + 4])
            return  # an ordinary comment
        kind = m.group(1)
        i = skip_blanks(line, m.end())
        n = re.compile(r"[^ \t]+").match(line, i)
        if not n:
            raise Problem("%s line without a metric name" % kind)
        name = n.group(0)
        self.check_name(name)
        rest = line[n.end():]
        fam = self.family(name)
        self.enter(name)
        if fam["samples"]:
            raise Problem("%s of %r after its samples" % (kind, name))
        if kind == "HELP":
            if fam["help"] is not None:
                raise Problem("second HELP line for %r" % name)
            if rest and rest[0] not in BLANK:
                raise Problem("bad HELP line")
            text = rest[1:] if rest else ""
            fam["help"] = unescape(text, {"\\": "\\", "n": "\n"}, "HELP of %r" % name)
        else:
            if fam["type"] is not None:
                raise Problem("second TYPE line for %r" % name)
            kind_word = rest.strip(BLANK)
            if kind_word not in TYPES:
                raise Problem("TYPE of %r is %r, not one of %s" %
                              (name, kind_word, ", ".join(sorted(TYPES))))
            if not rest or rest[0] not in BLANK:
                raise Problem("bad TYPE line")
            fam["type"] = kind_word

    def sample(self, line):
        m = NAME.match(line)
        if not m:
            raise Problem("not a sample, comment or blank line: %r" % line[:40])
        name = m.group(0)
        self.check_name(name)
        i = m.end()
        labels = {}
        if i < len(line) and line[i] == "{":
            labels, i = parse_labels(line, i)
        if i >= len(line):
            raise Problem("sample %r has no value" % name)
        if line[i] not in BLANK:
            raise Problem("expected a blank and the value after %r" % name)
        fields = [f for f in re.split(r"[ \t]+", line[i:].strip(BLANK)) if f]
        if not fields:
            raise Problem("sample %r has no value" % name)
        if len(fields) > 2:
            raise Problem("sample %r: unexpected text after the timestamp: %r" %
                          (name, " ".join(fields[2:])))
        value = parse_value(fields[0])
        if len(fields) == 2:
            if not INT64.match(fields[1]) or not -2**63 <= int(fields[1]) < 2**63:
                raise Problem("sample %r: timestamp %r is not a 64-bit integer" %
                              (name, fields[1]))
        fam_name = self.family_of(name)
        fam = self.family(fam_name)
        self.enter(fam_name)
        fam["samples"] += 1
        if fam["type"] == "counter" and (value != value or value < 0):
            raise Problem("counter %r has the value %s" % (name, fields[0]))
        key = (name, tuple(sorted(labels.items())))
        if key in self.series:
            raise Problem("series %s%s appears twice" % (name, labels or ""))
        self.series.add(key)
        self.samples.append({"name": name, "family": fam_name, "labels": labels,
                             "value": fields[0]})

    def line(self, line):
        for ch in line:
            if (ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7f:
                raise Problem("raw control character U+%04X" % ord(ch))
        stripped = line.strip(BLANK)
        if not stripped:
            return
        if stripped[0] == "#":
            self.comment(stripped)
        else:
            self.sample(stripped)


def check(data, prefix=None):
    """Returns (problems, checker)."""
    problems = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        return ["line %d: not valid UTF-8 (byte %d)" % (line, e.start)], None
    if text and not text.endswith("\n"):
        problems.append("line %d: the last line does not end in a line feed" %
                        (text.count("\n") + 1))
    c = Checker(prefix)
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    for n, line in enumerate(lines, 1):
        try:
            c.line(line)
        except Problem as e:
            problems.append("line %d: %s" % (n, e))
    return problems, c


def main(argv):
    dump = False
    prefix = None
    path = None
    args = list(argv[1:])
    while args:
        a = args.pop(0)
        if a == "--dump":
            dump = True
        elif a == "--require-prefix" and args:
            prefix = args.pop(0)
        elif a.startswith("-") and a != "-":
            print("usage: check_exposition.py [--dump] [--require-prefix P] [FILE]",
                  file=sys.stderr)
            return 2
        else:
            path = a
    if path and path != "-":
        with open(path, "rb") as f:
            data = f.read()
    else:
        data = sys.stdin.buffer.read()
    problems, c = check(data, prefix)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    if dump:
        fams = {k: {"type": v["type"], "help": v["help"]} for k, v in c.families.items()}
        json.dump({"families": fams, "samples": c.samples}, sys.stdout)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
