#!/usr/bin/env python3
"""Measure the length of every function in the product code (issue 61: no function over
about 100 lines).

A function's length is the count of lines from the line of its `fn` keyword to the line
of the `}` that closes its body, both included: its signature, body, comments, blank
lines, and any closure or nested `fn` inside it (a nested `fn` is also measured on its
own). Declarations without a body (`fn f(&self);` in a trait) are not functions here.

Not product code, skipped: an item marked `#[cfg(test)]` or `#[test]` (a `mod tests
{ ... }` block wherever it stands in the file, a test-only helper), a file whose module is
declared `#[cfg(test)] mod name;`, and a file that opens with `#![cfg(test)]`.

The source is read by a small Rust lexer, so braces inside strings (raw strings
`r#"..."#` too), character literals (`'{'`, as opposed to the lifetime `'a` or a label
`'outer:`), and comments (nested `/* */` too) do not count.

Usage: python3 scripts/fn_lengths.py [--max N] [--top K] [src-dir]
  without --max: the figures (functions, over 100 and over 120 lines, the longest) and the
                 K longest functions (default 20);
  --max N:       every function longer than N lines; exit 1 when there is one.
"""
import argparse
import os
import re
import signal
import sys

IDENT_START = re.compile(r"[A-Za-z_]")
IDENT = re.compile(r"[A-Za-z0-9_]*")
RAW_STRING = re.compile(r'(?:b|c)?r(#*)"')
PREFIXED_QUOTE = re.compile(r"""(?:b|c)?["']""")


def tokens(text):
    """The tokens of a Rust source as (text, line) pairs: identifiers and keywords (raw
    identifiers without `r#`), and each other character outside strings, character
    literals, lifetimes and comments (which are dropped, with the lines they span)."""
    out = []
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += text[i] == "\n"
                    i += 1
        elif m := RAW_STRING.match(text, i):
            end = text.find('"' + m.group(1), m.end())
            end = n if end < 0 else end + 1 + len(m.group(1))
            line += text.count("\n", i, end)
            i = end
        elif text.startswith("r#", i) and i + 2 < n and IDENT_START.match(text[i + 2]):
            m = IDENT.match(text, i + 2)
            out.append((m.group(), line))
            i = m.end()
        elif (m := PREFIXED_QUOTE.match(text, i)) and m.group().endswith('"'):
            j = m.end()
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            line += text.count("\n", i, j)
            i = j + 1
        elif m and (text[m.end()] == "\\" or text[m.end() + 1 : m.end() + 2] == "'"):
            # A character literal: 'x', '\n', '\'', '\u{7f}', b'x'. (A lifetime or label,
            # 'a or 'outer, has no closing quote right after its first character.)
            j = m.end() + (2 if text[m.end()] == "\\" else 1)
            while j < n and text[j] != "'":
                j += 1
            i = j + 1
        elif c == "'":
            i = IDENT.match(text, i + 1).end()
        elif IDENT_START.match(c) or c.isdigit():
            m = IDENT.match(text, i)
            out.append((m.group(), line))
            i = m.end()
        else:
            out.append((c, line))
            i += 1
    return out


def closing_braces(toks):
    """For each `{` token's index, the index of the `}` that closes it."""
    close, stack = {}, []
    for k, (t, _) in enumerate(toks):
        if t == "{":
            stack.append(k)
        elif t == "}" and stack:
            close[stack.pop()] = k
    return close


def item_end(toks, close, k):
    """The index of the last token of the item starting at token `k` (after its
    attributes): its first `;` outside parentheses and brackets, or the `}` closing
    its first `{`."""
    depth = 0
    while k < len(toks):
        t = toks[k][0]
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        elif depth == 0 and t == ";":
            return k
        elif t == "{":
            return close.get(k, len(toks) - 1)
        k += 1
    return len(toks) - 1


def attribute(toks, k):
    """When an outer attribute `#[...]` starts at token `k`: its inner tokens joined
    (`cfg(test)`) and the index after its `]`. Otherwise None."""
    if toks[k][0] != "#" or k + 1 >= len(toks) or toks[k + 1][0] != "[":
        return None
    depth, j = 0, k + 1
    while j < len(toks):
        t = toks[j][0]
        depth += t == "["
        depth -= t == "]"
        if depth == 0:
            return "".join(t for t, _ in toks[k + 2 : j]), j + 1
        j += 1
    return None


def measure(path):
    """(functions, test module files) of one source file: functions as (lines, name,
    first line); test module files are the paths of `#[cfg(test)] mod name;` files."""
    text = open(path, encoding="utf-8").read()
    toks = tokens(text)
    if re.match(r"(\s|//[^\n]*\n)*#!\[cfg\(test\)\]", text):
        return [], []
    close = closing_braces(toks)
    fns, test_files = [], []
    k = 0
    while k < len(toks):
        attr = attribute(toks, k)
        if attr and attr[0] in ("cfg(test)", "test"):
            j = attr[1]
            while (a := attribute(toks, j)) is not None:
                j = a[1]
            end = item_end(toks, close, j)
            words = [t for t, _ in toks[j : end + 1]]
            if "mod" in words and words[-1] == ";":
                name = words[words.index("mod") + 1]
                base = os.path.dirname(path)
                if os.path.basename(path) not in ("mod.rs", "lib.rs", "main.rs"):
                    base = os.path.join(base, os.path.basename(path)[:-3])
                test_files += [os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")]
            k = end + 1
            continue
        if toks[k][0] == "fn" and k + 1 < len(toks) and IDENT_START.match(toks[k + 1][0]):
            end = item_end(toks, close, k)
            if toks[end][0] == "}":
                fns.append((toks[end][1] - toks[k][1] + 1, toks[k + 1][0], toks[k][1]))
        k += 1
    return fns, test_files


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", nargs="?", default="src")
    parser.add_argument("--max", type=int, help="list the functions longer than this and exit 1 if any")
    parser.add_argument("--top", type=int, default=20, help="how many of the longest to list")
    args = parser.parse_args()

    found, test_files = [], set()
    for root, dirs, files in os.walk(args.src):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".rs"):
                path = os.path.join(root, f)
                fns, tests = measure(path)
                found += [(n, path, name, ln) for n, name, ln in fns]
                test_files.update(os.path.normpath(t) for t in tests)
    found = [r for r in found if os.path.normpath(r[1]) not in test_files]
    found.sort(key=lambda r: (-r[0], r[1], r[3]))

    if args.max is not None:
        over = [r for r in found if r[0] > args.max]
        for n, path, name, ln in over:
            print(f"{path}:{ln}: fn {name} is {n} lines (max {args.max})")
        if over:
            print(f"{len(over)} function(s) over {args.max} lines (scripts/fn_lengths.py)")
            return 1
        return 0

    longest = found[0] if found else (0, "-", "-", 0)
    print(
        f"{len(found)} functions; {sum(r[0] > 100 for r in found)} over 100 lines, "
        f"{sum(r[0] > 120 for r in found)} over 120; longest {longest[2]} "
        f"({longest[1]}:{longest[3]}) {longest[0]} lines"
    )
    for n, path, name, ln in found[: args.top]:
        print(f"{n:5} {path}:{ln} {name}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    sys.exit(main())
