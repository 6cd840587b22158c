#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every field of the inspection structures of fencelock.h has its entry in
src/common/info_fields.h, which `fencelock status` (tables, --json, --watch)
and the metrics writer are made from: a field added to the header without
its entry would be shown nowhere.  The compiler checks the other way (an
entry that names no field does not build).

  cli_info_fields.py SOURCE_DIR
"""
import os
import re
import sys

STRUCTS = {
    "fl_region_info": "FL_REGION_INFO_FIELDS",
    "fl_lock_info": "FL_LOCK_INFO_FIELDS",
    "fl_record_info": "FL_RECORD_INFO_FIELDS",
    "fl_client_info": "FL_CLIENT_INFO_FIELDS",
}


def header_fields(text, struct):
    m = re.search(r"typedef struct %s \{(.*?)\} %s;" % (struct, struct), text, re.S)
    if not m:
        sys.exit(f"info_fields_test: no typedef struct {struct} in fencelock.h")
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    names = re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*;", body)
    return [n for n in names if n != "reserved"]  # room to grow (docs/abi.md)


def list_fields(text, macro):
    m = re.search(r"#define %s\([^)]*\)(.*?)\n\s*\n" % macro, text, re.S)
    if not m:
        sys.exit(f"info_fields_test: no #define {macro}(...) in info_fields.h")
    return re.findall(r"\bX\((\w+),", m.group(1))


def main():
    top = sys.argv[1]
    header = open(os.path.join(top, "include", "fencelock.h"), encoding="utf-8").read()
    lists = open(os.path.join(top, "src", "common", "info_fields.h"), encoding="utf-8").read()
    problems = []
    for struct, macro in STRUCTS.items():
        have = header_fields(header, struct)
        listed = list_fields(lists, macro)
        if len(have) < 4 or not listed:
            problems.append(f"{struct}: found {len(have)} fields and {len(listed)} entries: "
                            "is this test's pattern out of date?")
        for name in have:
            if name not in listed:
                problems.append(f"{struct}.{name} has no entry in {macro} "
                                "(src/common/info_fields.h)")
    for p in problems:
        print(f"info_fields_test: {p}", file=sys.stderr)
    if not problems:
        print(f"info_fields: every field of {', '.join(STRUCTS)} is listed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
