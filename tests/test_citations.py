"""Every citation in the repository's code, config and docs is one a clone can open: the paper's
section, a URL, or a file of this repository (docs/canine.md holds the facts about CANINE the code
relies on). Not allowed: paths outside the repository (the folder beside it that a clone does not
have) and numbers of an internal issue tracker, which a clone does not have either.

The scan walks the tree (so a new, not yet committed file is checked too), skipping what
.gitignore skips and hidden folders. Under pipeline/sample/ and tests/data/ it reads only README.md
and Python files: the rest there is Wikipedia-style text, where such words may occur legitimately.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = {".py", ".yaml", ".yml", ".toml", ".md", ".sh", ".flags", ".cfg", ".ini"}
NAMES = {"Makefile", "Dockerfile"}
SKIP_DIRS = {"__pycache__", "build", "runs", "out", "node_modules"}
DATA_DIRS = {Path("pipeline/sample"), Path("tests/data")}
THIS = Path(__file__).resolve()

FORBIDDEN = [
    (re.compile(r"\.\./shared/"), "a path outside the repository"),
    (re.compile(r"\bshared/(?:CANINE|STYLE)\.md"), "a file outside the repository"),
    (re.compile(r"(?<![\w/.-])(?:CANINE|STYLE)\.md\b"), "a file outside the repository (docs/canine.md?)"),
    (re.compile(r"\bissues? \d+\b", re.IGNORECASE), "an internal tracker number"),
]
DOC_CITATION = re.compile(r"\bdocs/([\w.-]+\.md)\b")
CANINE_SECTION = re.compile(r"docs/canine\.md,? \"([^\"]+)\"")


def scanned_files():
    """Code, config and docs of the repository, as paths relative to ROOT."""
    found = []
    stack = [ROOT]
    while stack:
        folder = stack.pop()
        for entry in sorted(folder.iterdir()):
            rel = entry.relative_to(ROOT)
            if entry.is_dir():
                if not (entry.name.startswith(".") or entry.name in SKIP_DIRS or entry.name.endswith(".egg-info")):
                    stack.append(entry)
                continue
            if not (entry.suffix in SUFFIXES or entry.name in NAMES or entry.name.endswith(".Dockerfile")):
                continue
            if any(d in rel.parents for d in DATA_DIRS) and not (entry.name == "README.md" or entry.suffix == ".py"):
                continue
            if entry.resolve() != THIS:
                found.append(rel)
    return found


def lines(rel: Path):
    text = (ROOT / rel).read_text(encoding="utf-8", errors="replace")
    return enumerate(text.splitlines(), 1)


def test_the_scan_sees_the_code_and_the_docs():
    files = set(scanned_files())
    for expected in ("training/model.py", "contract/schema.py", "docs/canine.md", "pyproject.toml", "Makefile",
                     "infra/k8s/raycluster.yaml", "tests/data/wiki/README.md"):
        assert Path(expected) in files, expected
    assert not any(p.suffix == ".xml" or ".venv" in p.parts for p in files)


def test_no_citation_a_clone_cannot_open():
    problems = []
    for rel in scanned_files():
        for number, line in lines(rel):
            for pattern, why in FORBIDDEN:
                match = pattern.search(line)
                if match:
                    problems.append(f"{rel}:{number}: {match.group(0)!r} is {why}: {line.strip()}")
    assert not problems, "cite the paper's section, a URL or a file of this repository instead:\n" + "\n".join(problems)


def test_cited_docs_exist_and_canine_md_sections_are_its_headings():
    docs = ROOT / "docs"
    headings = {m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", (docs / "canine.md").read_text(), re.M)}
    problems = []
    for rel in scanned_files():
        # A citation may wrap onto the next line: read each line together with the next.
        numbered = list(lines(rel))
        for i, (number, line) in enumerate(numbered):
            joined = line + (" " + numbered[i + 1][1].lstrip("# ").strip() if i + 1 < len(numbered) else "")
            for name in DOC_CITATION.findall(line):
                if not (docs / name).is_file():
                    problems.append(f"{rel}:{number}: docs/{name} does not exist")
            for match in CANINE_SECTION.finditer(joined):
                section = " ".join(match.group(1).split())
                if match.start() < len(line) and section not in headings:  # citations that start on this line
                    problems.append(f"{rel}:{number}: docs/canine.md has no heading {section!r}")
    assert not problems, "\n".join(problems)
