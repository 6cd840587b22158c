#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The documents a reader follows from the README hold together.

  doc_test.py SRC links     every relative link in README.md, docs/*.md and
                            the bindings' READMEs names a file or directory
                            that exists, and a #fragment names a heading of
                            the Markdown file it points into
  doc_test.py SRC summary   README.md's benchmark table is exactly what
                            `bench/run --summary` prints from the committed
                            results (so every figure there comes from it)

Links inside code spans and fenced code blocks are not links and are not
checked; http(s) and mailto links are not fetched.
"""
import glob
import os
import re
import subprocess
import sys

LINK = re.compile(r"(?<!\\)\[(?:[^\]\\]|\\.)*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to -."""
    h = re.sub(r"[`*_]", "", heading.strip().lower())
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def prose(text):
    """The text without fenced code blocks and code spans."""
    text = re.sub(r"^```.*?^```[ \t]*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path):
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"^```.*?^```[ \t]*$", "", f.read(), flags=re.M | re.S)
    seen, out = {}, set()
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.M):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def links(src):
    docs = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    docs += sorted(glob.glob(os.path.join(src, "bindings", "*", "README.md")))
    bad = []
    for doc in docs:
        with open(doc, encoding="utf-8") as f:
            text = prose(f.read())
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, frag = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            where = os.path.relpath(doc, src)
            if not os.path.exists(full):
                bad.append(f"{where}: ({target}): {os.path.relpath(full, src)} does not exist")
            elif frag and full.endswith(".md") and frag not in anchors(full):
                bad.append(f"{where}: ({target}): {os.path.relpath(full, src)} has no heading #{frag}")
    return bad


def summary(src):
    with open(os.path.join(src, "README.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- bench-summary:begin -->\n(.*?)<!-- bench-summary:end -->", text, re.S)
    if not m:
        return ["README.md: no <!-- bench-summary:begin --> ... <!-- bench-summary:end --> block"]
    env = dict(os.environ)
    env.pop("FL_BENCH_RESULTS", None)
    out = subprocess.run([os.path.join(src, "bench", "run"), "--summary"], check=True,
                         capture_output=True, text=True, env=env).stdout
    if m.group(1) != out:
        return ["README.md: the benchmark table is not what `bench/run --summary` prints;"
                " paste its output between the bench-summary markers"]
    return []


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("links", "summary"):
        sys.exit(__doc__)
    src = os.path.abspath(sys.argv[1])
    bad = links(src) if sys.argv[2] == "links" else summary(src)
    for b in bad:
        print(f"doc_test: {b}", file=sys.stderr)
    sys.exit(1 if bad else 0)


main()
