"""The layers import downwards only, and no benchmark imports test code.

    loopback/   services on 127.0.0.1 for tests and benchmarks: imports no layer
    contract/   the shard contract and what both sides share (the base install): imports no layer
    pipeline/   preprocessing, which writes the shards: may import contract/
    training/   the model and the trainer, which read them: may import contract/, not pipeline/
    jobs/       the `canine` command: may import contract/, pipeline/ and training/

pipeline/ and training/ sit side by side on contract/: neither imports the other, so a change
inside one cannot break the other except through the contract. Read from the source (every
`import` / `from ... import`, at module level or inside a function, since the heavy imports are
deferred), so a lazy import cannot slip past.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "loopback": set(),
    "contract": set(),
    "pipeline": {"contract"},
    "training": {"contract"},
    "jobs": {"contract", "pipeline", "training"},
    "benchmarks": {"contract", "pipeline", "training", "jobs", "loopback"},
}
LAYERS = set(ALLOWED)
TEST_MODULES = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {"tests"}


def imported(path: Path) -> set[str]:
    """Top-level names of every module `path` imports (relative imports resolve to its own package)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names


def sources(layer: str):
    return sorted((ROOT / layer).rglob("*.py"))


def above(layer: str, path: Path) -> set[str]:
    """The layers `path` (a module of `layer`) imports that `layer` may not."""
    return (imported(path) & LAYERS) - ALLOWED[layer] - {layer}


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_below_it(layer):
    wrong = {str(path.relative_to(ROOT)): sorted(above(layer, path)) for path in sources(layer) if above(layer, path)}
    assert not wrong, f"{layer}/ may import only {sorted(ALLOWED[layer]) or 'no other layer'}; these import more: {wrong}"


def test_every_package_is_a_layer():
    """A new top-level package gets a row in ALLOWED, so its imports are checked too."""
    assert {p.parent.name for p in ROOT.glob("*/__init__.py")} <= LAYERS


def test_benchmarks_do_not_import_test_code():
    wrong = {}
    for path in sources("benchmarks"):
        text = path.read_text()
        # A test helper reached by putting tests/ on sys.path, or imported by its module name.
        names = imported(path) & (TEST_MODULES - {p.stem for p in sources("benchmarks")})
        if names or '"tests")' in text.replace("'", '"') and "sys.path" in text:
            wrong[str(path.relative_to(ROOT))] = sorted(names) or ["tests/ on sys.path"]
    assert not wrong, f"benchmarks import test code (move what they share to loopback/): {wrong}"


def test_the_check_sees_a_violation(tmp_path):
    """The walk finds a deferred import inside a function, the kind these layers use, and the
    rule names the training side reaching into the pipeline."""
    bad = tmp_path / "m.py"
    bad.write_text("from contract import schema\n\n\ndef f():\n    from pipeline.masks import plan_examples\n"
                   "    import training.model\n")
    assert imported(bad) == {"contract", "pipeline", "training"}
    assert above("training", bad) == {"pipeline"}
    assert above("contract", bad) == {"pipeline", "training"}
    assert above("jobs", bad) == set()
