#!/usr/bin/env python3
"""Build the fresh code-search set `vault-code-fresh` (issue 58): the same construction as
`build_code_set.py`, from sources that set never used, in four languages.

- Rust: crates of cargo's registry here that are not in `vault-code/crates.txt` (by name,
  any version), taken in the order of a hash of their name, at most 4 functions a crate.
- Python: modules of the running interpreter's standard library (tests, idlelib, lib2to3,
  encodings and site-packages left out), at most 2 functions a module.
- JavaScript: the hand-written CommonJS packages under `tests/mcp_ts/node_modules` (files
  with JSDoc; no `dist/`, `esm/`, minified or test files).
- Java: the JDK's `lib/src.zip` (`java.base` and the other `java.*` modules).

Go: no Go sources are installed on this machine (no toolchain, no module cache), so none.

Each query is the first sentence of a function's doc comment (`///`, a docstring, a JSDoc
or Javadoc block), inline markup removed; the answer is that function (`path#name`: a hit
of that file whose heading path contains the name). Every doc comment and docstring is
removed from the indexed files, so the query's words are not in them. A function is taken
only when its name is in no other identifier of its file's heading paths (module path,
other functions, types), so `path#name` judges that function alone.

    python3 tests/eval/build_code_fresh.py OUT_DIR [tests/eval/vault-code-fresh/sources.txt]
    cairn eval vault --code --corpus OUT_DIR/corpus --queries tests/eval/vault-code-fresh/queries.jsonl --qrels tests/eval/vault-code-fresh/qrels.tsv

`OUT_DIR/queries.jsonl`, `qrels.tsv` and `sources.txt` are what `tests/eval/vault-code-fresh/`
holds. Given `sources.txt` as the second argument, only the crates and packages it lists
are read, so the committed set is rebuilt after the registry has gained crates.
"""

import ast
import hashlib
import json
import re
import sys
import sysconfig
import zipfile
from pathlib import Path

from build_code_set import MAX_FILE_BYTES, SKIP, crates, first_sentence, functions, strip_docs

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE.parent / "mcp_ts/node_modules"
JDK_SRC = Path("/usr/lib/jvm/temurin-25-jdk-amd64/lib/src.zip")
QUOTA = {"rust": 60, "python": 45, "javascript": 20, "java": 35}
MAX_PER_FILE = 2
MAX_PER_UNIT = {"rust": 4, "python": 2, "javascript": 6, "java": 3}


def h(s):
    return hashlib.sha256(s.encode()).hexdigest()


def sentence_ok(q):
    words = q.split()
    return 5 <= len(words) <= 30 and "#" not in q and not q.lower().startswith(
        ("see ", "this is", "safety", "deprecated", "internal", "todo", "@")
    )


def unambiguous(name, names, rel):
    """`name` is in no other identifier of the file nor in its path."""
    stem = rel.rsplit(".", 1)[0]
    return sum(1 for n in names if name in n) == 1 and name not in stem


# ---------- Rust ----------
def rust(used, only):
    out = []
    for crate in sorted(crates(only), key=lambda c: h(c.name.rsplit("-", 1)[0])):
        if crate.name.rsplit("-", 1)[0] in used:
            continue
        took = 0
        for f in sorted((crate / "src").rglob("*.rs")):
            if took >= MAX_PER_UNIT["rust"] or len(out) >= QUOTA["rust"]:
                break
            if f.stat().st_size > MAX_FILE_BYTES or "test" in f.name:
                continue
            text = f.read_text(encoding="utf-8", errors="replace")
            names = re.findall(r"\b(?:fn|struct|enum|trait|type|mod|union)\s+([A-Za-z_]\w*)", text)
            rel = f"rust/{crate.name}/{f.relative_to(crate)}"
            picked = 0
            for name, q in functions(f):
                if picked >= MAX_PER_FILE or took >= MAX_PER_UNIT["rust"] or len(out) >= QUOTA["rust"]:
                    break
                if sentence_ok(q) and unambiguous(name, names, rel):
                    out.append((q, rel, name, strip_docs(text)))
                    picked += 1
                    took += 1
    return out


# ---------- Python ----------
def py_strip(text, tree):
    """The module without its docstrings; a body that held only its docstring gets `pass`."""
    lines = text.splitlines()
    drop, passes = set(), {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            drop.update(range(first.lineno, first.end_lineno + 1))
            if len(node.body) == 1:
                passes[first.lineno] = " " * first.col_offset + "pass"
    kept = [passes.get(i, l) for i, l in enumerate(lines, 1) if i not in drop or i in passes]
    return "\n".join(kept) + "\n"


def py_first_sentence(doc):
    para = []
    for l in doc.strip().splitlines():
        if not l.strip():
            break
        para.append(l.strip())
    s = " ".join(para).replace("``", "").replace("`", "")
    s = re.sub(r":(?:func|meth|class|attr|mod|exc|data|const|term|ref):", "", s)
    m = re.match(r"(.+?[.!?])(\s|$)", s)
    return (m.group(1) if m else s).strip()


def python():
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    out = []
    skip = re.compile(r"(^|/)(test|tests|idlelib|lib2to3|encodings|site-packages|turtledemo|__pycache__|ensurepip|pydoc_data)(/|$)")
    files = [f for f in stdlib.rglob("*.py") if not skip.search(str(f.relative_to(stdlib)))]
    for f in sorted(files, key=lambda p: h(str(p.relative_to(stdlib)))):
        if len(out) >= QUOTA["python"]:
            break
        if f.stat().st_size > MAX_FILE_BYTES or f.name.startswith("_") and f.name != "__init__.py":
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        names = [n.name for n in defs]
        rel = f"python/{f.relative_to(stdlib)}"
        picked = 0
        for n in defs:
            if picked >= MAX_PER_UNIT["python"] or len(out) >= QUOTA["python"]:
                break
            if isinstance(n, ast.ClassDef) or n.name.startswith("_"):
                continue
            doc = ast.get_docstring(n)
            if not doc:
                continue
            q = py_first_sentence(doc)
            if sentence_ok(q) and unambiguous(n.name, names, rel):
                stripped = py_strip(text, tree)
                ast.parse(stripped)  # still Python
                out.append((q, rel, n.name, stripped))
                picked += 1
    return out


# ---------- JSDoc / Javadoc ----------
DOC_BLOCK = re.compile(r"/\*\*(.*?)\*/", re.S)


def block_first_sentence(body):
    lines = [re.sub(r"^\s*\*\s?", "", l) for l in body.strip().splitlines()]
    para = []
    for l in lines:
        if not l.strip() or l.strip().startswith("@"):
            break
        para.append(l.strip())
    s = " ".join(para)
    s = re.sub(r"\{@return\s+([^}]*)\}", lambda m: "Returns " + m.group(1) + ".", s)
    s = re.sub(r"\{@(?:code|link|linkplain|literal)\s+([^}]*)\}", lambda m: m.group(1).split("#")[-1].split("(")[0] if "#" in m.group(1) else m.group(1), s)
    s = re.sub(r"<[^>]+>", "", s).replace("`", "")
    s = re.sub(r"\s+", " ", s)
    m = re.match(r"(.+?[.!?])(\s|$)", s)
    return (m.group(1) if m else s).strip()


def strip_blocks(text):
    # Keep the line count: a removed block leaves its newlines.
    return DOC_BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def documented(text, signature):
    """(name, first sentence) of each doc block followed by a declaration `signature` matches."""
    out = []
    for m in DOC_BLOCK.finditer(text):
        rest = text[m.end():].lstrip("\n")
        line = rest.split("\n", 1)[0]
        while line.strip().startswith("@"):  # annotations
            rest = rest.split("\n", 1)[1] if "\n" in rest else ""
            line = rest.split("\n", 1)[0]
        s = signature.match(line)
        if s:
            out.append((s.group("name"), block_first_sentence(m.group(1))))
    return out


JS_SIG = re.compile(r"^\s*(?:export\s+)?(?:async\s+)?function\s*\*?\s*(?P<name>[A-Za-z_$][\w$]*)\s*\(|^\s{2}(?:static\s+)?(?:async\s+)?(?P<name2>[A-Za-z_$][\w$]*)\s*\([^)]*\)\s*\{")
JS_NAMES = re.compile(r"\b(?:function\s*\*?\s*|class\s+)([A-Za-z_$][\w$]*)|^\s{2}(?:static\s+)?(?:async\s+)?([A-Za-z_$][\w$]*)\s*\([^)]*\)\s*\{", re.M)


class JsSig:
    def match(self, line):
        m = JS_SIG.match(line)
        if not m:
            return None
        name = m.group("name") or m.group("name2")
        if name in ("if", "for", "while", "switch", "catch", "return", "constructor", "function"):
            return None
        return {"name": name}


def javascript(only):
    out = []
    skip = re.compile(r"(/dist/|/esm/|/cjs/|/test/|/tests/|\.min\.|/node_modules/.*/node_modules/|/@)")
    files = [f for f in NODE_MODULES.rglob("*.js") if not skip.search("/" + str(f.relative_to(NODE_MODULES)))]
    per_pkg = {}
    sig = JsSig()
    for f in sorted(files, key=lambda p: h(str(p.relative_to(NODE_MODULES)))):
        if len(out) >= QUOTA["javascript"]:
            break
        if f.stat().st_size > MAX_FILE_BYTES:
            continue
        pkg = f.relative_to(NODE_MODULES).parts[0]
        if only is not None and pkg not in only:
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        names = [a or b for a, b in JS_NAMES.findall(text)]
        rel = f"javascript/{f.relative_to(NODE_MODULES)}"
        picked = 0
        for m in DOC_BLOCK.finditer(text):
            if picked >= MAX_PER_FILE or per_pkg.get(pkg, 0) >= MAX_PER_UNIT["javascript"] or len(out) >= QUOTA["javascript"]:
                break
            line = text[m.end():].lstrip("\n").split("\n", 1)[0]
            s = sig.match(line)
            if not s:
                continue
            name, q = s["name"], block_first_sentence(m.group(1))
            if sentence_ok(q) and unambiguous(name, names, rel):
                out.append((q, rel, name, strip_blocks(text)))
                picked += 1
                per_pkg[pkg] = per_pkg.get(pkg, 0) + 1
    return out


JAVA_SIG = re.compile(r"^\s*(?:(?:public|protected|private|static|final|abstract|synchronized|native|default|strictfp)\s+)*(?:<[^>]*>\s+)?[\w.<>\[\],? ]+?\s+(?P<name>[a-z]\w*)\s*\(")
JAVA_NAMES = re.compile(r"\b(?:class|interface|enum|record)\s+([A-Za-z_]\w*)|\s(?P<m>[a-z]\w*)\s*\([^;{]*\)\s*(?:throws [\w., ]+)?\s*\{")


def java():
    out = []
    per_pkg = {}
    with zipfile.ZipFile(JDK_SRC) as z:
        members = [n for n in z.namelist() if re.match(r"java\.[a-z.]+/java/.*\.java$", n) and not n.endswith(("package-info.java", "module-info.java"))]
        for n in sorted(members, key=h):
            if len(out) >= QUOTA["java"]:
                break
            info = z.getinfo(n)
            if info.file_size > MAX_FILE_BYTES:
                continue
            pkg = n.rsplit("/", 1)[0]
            text = z.read(n).decode("utf-8", errors="replace")
            names = [a or b for a, b in JAVA_NAMES.findall(text)]
            rel = f"java/{n}"
            picked = 0
            for name, q in documented(text, JAVA_SIG):
                if picked >= MAX_PER_FILE or per_pkg.get(pkg, 0) >= MAX_PER_UNIT["java"] or len(out) >= QUOTA["java"]:
                    break
                if sentence_ok(q) and unambiguous(name, names, rel) and names.count(name) <= 1:
                    out.append((q, rel, name, strip_blocks(text)))
                    picked += 1
                    per_pkg[pkg] = per_pkg.get(pkg, 0) + 1
    return out


def main(out, only=None):
    out = Path(out)
    used = {l.strip().rsplit("-", 1)[0] for l in (HERE / "vault-code/crates.txt").read_text().splitlines() if l.strip()}
    picked = {"rust": rust(used, only), "python": python(), "javascript": javascript(only), "java": java()}
    files = {}
    rows = []
    for lang, items in picked.items():
        for q, rel, name, text in items:
            files[rel] = text
            rows.append((lang, q, f"{rel}#{name}"))
        print(f"{lang}: {len(items)} queries", file=sys.stderr)
    for rel, text in files.items():
        target = out / "corpus" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    with open(out / "queries.jsonl", "w") as fq, open(out / "qrels.tsv", "w") as fr:
        fr.write("query-id\tcorpus-id\tscore\n")
        for i, (lang, q, answer) in enumerate(rows):
            qid = f"fresh-{i:03}"
            fq.write(json.dumps({"_id": qid, "text": q, "metadata": {"category": lang}}) + "\n")
            fr.write(f"{qid}\t{answer}\t1\n")
    src = [f"python {sys.version.split()[0]}", f"jdk {JDK_SRC}"]
    src += sorted({r.split("/", 2)[1] for r in files if r.startswith("rust/")})
    src += sorted({r.split("/", 2)[1] for r in files if r.startswith("javascript/")})
    (out / "sources.txt").write_text("\n".join(src) + "\n")
    print(f"{len(rows)} queries, {len(files)} files", file=sys.stderr)


if __name__ == "__main__":
    only = set(Path(sys.argv[2]).read_text().split()) if len(sys.argv) > 2 else None
    main(sys.argv[1], only)
