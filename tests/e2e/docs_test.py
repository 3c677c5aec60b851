#!/usr/bin/env python3
"""The repository's documents stand on their own.

Code and docs cite the repo's METRICS.md and DESIGN.md by section ("METRICS.md §5",
"DESIGN.md §1-2"); every cited section must exist there. No tracked file may point
outside the repository at a sibling "shared" folder (a clone does not have it), and a
relative link in a Markdown file must name a file that exists.

Usage: docs_test.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys

# Built so that this file does not match itself.
OUTSIDE = "../" + "shared/"
DOCS = ("METRICS.md", "DESIGN.md")
SOURCE_EXTENSIONS = (".cc", ".h", ".md", ".txt", ".py", ".sh", ".fbs", ".cmake", ".yaml",
                     ".yml", ".json", ".conf", ".service")
# A citation may wrap onto the next comment line: "(DESIGN.md\n// §1)".
CITATION = re.compile(r"\b(METRICS|DESIGN)\.md(?:\s|//|#|\*|\()*§\s*(\d+)"
                      r"(?:\s*[-–]\s*§?\s*(\d+))?")
HEADING = re.compile(r"^## (\d+)\. \S", re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout.decode()
        return [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):  # a tarball: walk the tree
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith((".git", "build"))]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return files


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, OSError):
        return None


def main():
    root = sys.argv[1]
    errors = []
    sections = {}
    for doc in DOCS:
        text = read(os.path.join(root, doc))
        if text is None:
            errors.append(f"{doc} is missing at the top of the repository")
            continue
        sections[doc.split(".")[0]] = {int(n) for n in HEADING.findall(text)}

    cited = 0
    for rel in tracked_files(root):
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            continue
        text = read(path)
        if text is None:
            continue
        if OUTSIDE in text:
            errors.append(f"{rel}: points outside the repository ({OUTSIDE})")
        if rel.endswith(SOURCE_EXTENSIONS):
            for m in CITATION.finditer(text):
                doc, first, last = m.group(1), int(m.group(2)), int(m.group(3) or m.group(2))
                line = text.count("\n", 0, m.start()) + 1
                for n in range(first, last + 1):
                    cited += 1
                    if n not in sections.get(doc, set()):
                        errors.append(f"{rel}:{line}: cites {doc}.md §{n}, which has no "
                                      f"'## {n}.' section")
        if rel.endswith(".md"):
            for target in LINK.findall(text):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue
                target = target.split("#")[0]
                linked = os.path.normpath(os.path.join(os.path.dirname(path), target))
                if not os.path.exists(linked):
                    errors.append(f"{rel}: links to {target}, which does not exist")

    for e in errors:
        print("FAIL", e)
    print(f"{cited} section citations checked")
    return 1 if errors or cited == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
