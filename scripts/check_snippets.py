#!/usr/bin/env python3
"""Extracts the ```cpp code blocks of markdown files as C++ translation units, so that the
build can compile every example the documentation shows (tests/CMakeLists.txt, target
doc_snippets).

Usage:
  scripts/check_snippets.py FILE.md...               list the blocks and how each is compiled
  scripts/check_snippets.py --out DIR FILE.md...     write DIR/<file>_<n>.cpp, one per block, and
                                                     print their paths, one a line

A block is a complete translation unit unless an HTML comment, invisible in the rendered page,
stands on the line before its opening fence:

  <!-- snippet: fragment -->          the block is a function body: it is compiled inside
                                      `int main() { ... }`, after `#include <kiln/kiln.hpp>`
  <!-- snippet: fragment              the same, with the lines after "fragment" (up to -->)
  constexpr auto x = ...;             placed at namespace scope before main: the declarations
  -->                                 the block uses but does not show
  <!-- snippet: skip -->              not compiled (say why in the page)

Each file starts with a #line directive, so compiler errors name the markdown file and line.
Files are rewritten only when their text changes, and files of blocks that no longer exist
are removed, so that a reconfigure rebuilds only what changed.
"""
import argparse
import os
import re
import sys

FENCE = re.compile(r"^```cpp\s*$")
MARKER = re.compile(r"^<!--\s*snippet:\s*(\w+)(.*)$")


def blocks(path):
    """Yields (line number of the first code line, code, mode, context) for each cpp block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        mode, context = "program", []
        # The marker comment: the lines just above the fence, from "<!-- snippet:" to "-->".
        j = i - 1
        if j >= 0 and lines[j].rstrip().endswith("-->"):
            k = j
            while k >= 0 and not lines[k].lstrip().startswith("<!--"):
                k -= 1
            m = MARKER.match(lines[k].strip()) if k >= 0 else None
            if m:
                mode = m.group(1)
                comment = [m.group(2)] + lines[k + 1:j + 1]
                comment[-1] = comment[-1].rstrip()[:-3]
                context = [c for c in comment if c.strip()]
        if mode not in ("program", "fragment", "skip"):
            raise SystemExit(f"{path}:{i}: unknown snippet mode '{mode}' (program, fragment or skip)")
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if end == len(lines):
            raise SystemExit(f"{path}:{i + 1}: unterminated code block")
        yield i + 2, "\n".join(lines[i + 1:end]), mode, context
        i = end + 1


def translation_unit(doc, first_line, code, mode, context):
    src = os.path.relpath(doc).replace("\\", "/")
    if mode == "program":
        return f'#line {first_line} "{src}"\n{code}\n'
    body = "\n".join("  " + line if line else "" for line in code.split("\n"))
    ctx = "\n".join(context)
    return (f"#include <kiln/kiln.hpp>\n{ctx}\n"
            f"int main() {{\n#line {first_line} \"{src}\"\n{body}\n}}\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", help="write one .cpp file per block into this folder")
    p.add_argument("docs", nargs="+")
    a = p.parse_args()
    written = []
    for doc in a.docs:
        stem = re.sub(r"[^A-Za-z0-9]+", "_", os.path.splitext(os.path.relpath(doc))[0]).strip("_")
        for n, (line, code, mode, context) in enumerate(blocks(doc), 1):
            if not a.out:
                print(f"{doc}:{line}: {mode}")
                continue
            if mode == "skip":
                continue
            path = os.path.join(a.out, f"{stem}_{n}.cpp")
            text = translation_unit(doc, line, code, mode, context)
            os.makedirs(a.out, exist_ok=True)
            old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
            if old != text:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            written.append(os.path.abspath(path))
    if a.out:
        keep = set(written)
        for name in os.listdir(a.out) if os.path.isdir(a.out) else []:
            full = os.path.abspath(os.path.join(a.out, name))
            if name.endswith(".cpp") and full not in keep:
                os.remove(full)
        print("\n".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
