"""The layers import downwards only, and no benchmark imports test code.

    loopback/   services on 127.0.0.1 for tests and benchmarks: imports no layer
    contract/   the shard contract and what both sides share (the base install): imports no layer
    pipeline/   preprocessing, which writes the shards: may import contract/
                (inside it, wings from the ground up: the shared base, sources/, wikitext/, rows/,
                the config, beam/, output/, the driver; each imports only those below it)
    training/   the model and the trainer, which read them: may import contract/, not pipeline/
                (inside it, train/ is a run, from its config to its export: it imports the model
                and what builds its input, the rest of training/, which never imports it)
    jobs/       the `canine` command: may import contract/, pipeline/ and training/

pipeline/ and training/ sit side by side on contract/: neither imports the other, so a change
inside one cannot break the other except through the contract. Read from the source (every
`import` / `from ... import`, at module level or inside a function, since the heavy imports are
deferred), so a lazy import cannot slip past.
"""
import ast
import re
import sys
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
    bad.write_text("from contract import schema\n\n\ndef f():\n    from pipeline.rows.masks import plan_examples\n"
                   "    import training.model\n")
    assert imported(bad) == {"contract", "pipeline", "training"}
    assert above("training", bad) == {"pipeline"}
    assert above("contract", bad) == {"pipeline", "training"}
    assert above("jobs", bad) == set()


# training/ is the CANINE model and what builds its input; training/train/ is a run of it, from its
# config to its export. The run imports the model, never the other way round.
TRAINER = "training.train"
INDEX_LINE = re.compile(r"^    (\w+\.py|\w+/) ", re.M)  # a package docstring's "    name.py  what it is"


def imported_modules(path: Path, package: tuple[str, ...] | None = None) -> set[str]:
    """Dotted names of every module `path` imports and of every name it imports from one (`from
    training import train` gives training.train), at module level or inside a function. A relative
    import resolves against `package` (default: the folder of `path` under the repository)."""
    package = path.resolve().relative_to(ROOT).parent.parts if package is None else package
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def reaches_the_trainer(path: Path, package: tuple[str, ...] | None = None) -> list[str]:
    return sorted(n for n in imported_modules(path, package) if n == TRAINER or n.startswith(TRAINER + "."))


# The drivers above the model: train/ (pretraining) and finetune/ (a downstream task), which drives
# the same workers and engine through train/'s pieces. finetune/ may import train/, never the reverse.
DRIVERS = ("train", "finetune")


def test_the_model_does_not_import_the_trainer():
    model_side = [p for p in sources("training") if not any(ROOT / "training" / d in p.parents for d in DRIVERS)]
    wrong = {str(p.relative_to(ROOT)): reaches_the_trainer(p) for p in model_side if reaches_the_trainer(p)}
    assert len(model_side) > 5 and not wrong, (
        "a module of training/ outside train/ imports training.train; the model and what builds its input "
        f"may not depend on the run (move the module into train/, or what both need down here): {wrong}")


FINETUNE = "training.finetune"


def test_finetuning_stands_above_pretraining():
    """train/ never imports finetune/ (a change to fine-tuning cannot break pretraining), and
    nothing of the model side does; finetune/ reaches the model, its input and train/ only."""
    below = [p for p in sources("training") if ROOT / "training" / "finetune" not in p.parents]
    wrong = {str(p.relative_to(ROOT)): sorted(n for n in imported_modules(p) if n.startswith(FINETUNE))
             for p in below}
    assert len(below) > 20 and not any(wrong.values()), f"below training/finetune/, these import it: {wrong}"
    finetune = sorted((ROOT / "training" / "finetune").glob("*.py"))
    assert len(finetune) >= 6 and any(reaches_the_trainer(p) for p in finetune)  # the check sees the arrow


def test_the_trainer_check_sees_a_violation(tmp_path):
    """A deferred import, a package imported by name, a submodule, and a relative import all count;
    the run's own siblings do not."""
    bad = tmp_path / "m.py"
    bad.write_text("from training import kernels\n\n\ndef f():\n    from training.train import rundir\n"
                   "    import training.train.run\n    from training import train\n    from .train.engine import wrap\n")
    assert reaches_the_trainer(bad, ("training",)) == [
        "training.train", "training.train.engine", "training.train.engine.wrap", "training.train.run",
        "training.train.rundir"]
    fine = tmp_path / "n.py"
    fine.write_text("from training import batch, seeds\nimport training.model\n")
    assert reaches_the_trainer(fine, ("training",)) == []


# pipeline/'s wings, from the ground up: a module imports only its own wing and the wings before it.
# A wing is a folder or some of the root's modules: the shared base stands under everything, the
# configuration (which checks its values by wikitext/'s variants and rows/' span rules) under the
# job, and the driver with what runs beside it on top. sources/ stands under wikitext/, which reads
# its pages and the dump's namespace names (sources/namespaces.py); output/ above beam/, since
# publishing reads what the job staged (beam/elements.py Stat, beam/itemcache.py's file names).
PIPELINE_WINGS = (
    ("seeds.py", "hashing.py", "faults.py"),
    ("sources/",),
    ("wikitext/",),
    ("rows/",),
    ("preprocess_config.py",),
    ("beam/",),
    ("output/",),
    ("synthetic.py", "progress.py", "run.py"),
    ("downstream/",),
)
NOT_A_WING = {"__init__.py", "sample/"}  # the index; the bundled sample dumps and the script that made them
WING_FOLDERS = [f"pipeline/{name[:-1]}" for wing in PIPELINE_WINGS for name in wing if name.endswith("/")]


def wing_of(name: str) -> int | None:
    """The index in PIPELINE_WINGS of the wing a dotted name lies in (`pipeline.beam.job`, or
    `pipeline.seeds.stable_int`, a name imported from a module); None outside pipeline's wings."""
    parts = name.split(".")
    if parts[0] != "pipeline" or len(parts) < 2:
        return None
    return next((i for i, wing in enumerate(PIPELINE_WINGS) if {f"{parts[1]}/", f"{parts[1]}.py"} & set(wing)), None)


def dotted(path: Path) -> str:
    return ".".join(path.resolve().relative_to(ROOT).with_suffix("").parts)


def above_its_wing(names: set[str], wing: int) -> list[str]:
    """The names, of those a module of wing `wing` imports, that lie in a wing above it."""
    return sorted(n for n in names if (w := wing_of(n)) is not None and w > wing)


def test_every_pipeline_module_stands_in_one_wing():
    present = ({p.name for p in (ROOT / "pipeline").glob("*.py")}
               | {f"{p.name}/" for p in (ROOT / "pipeline").iterdir() if p.is_dir() and p.name != "__pycache__"})
    listed = [name for wing in PIPELINE_WINGS for name in wing]
    twice = sorted({n for n in listed if listed.count(n) > 1})
    assert set(listed) == present - NOT_A_WING and not twice, (
        f"PIPELINE_WINGS: place {sorted(present - NOT_A_WING - set(listed))} in a wing; no such module "
        f"{sorted(set(listed) - present)}; listed twice {twice}")


def test_the_pipeline_wings_import_down_only():
    modules = [p for p in sources("pipeline") if wing_of(dotted(p)) is not None]
    wrong = {str(p.relative_to(ROOT)): above_its_wing(imported_modules(p), wing_of(dotted(p))) for p in modules}
    wrong = {k: v for k, v in wrong.items() if v}
    assert len(modules) > 40 and not wrong, (
        "a module of pipeline/ imports a wing above its own (tests/test_layers.py PIPELINE_WINGS, lowest first): "
        f"move what it needs down, or the module up: {wrong}")


def test_the_wing_check_sees_a_violation(tmp_path):
    """From beam/: its own wing, a wing below, the root package and a deferred import of the base
    pass; deferred imports of output/, of a module and of a name of the top wing, and a relative
    import of a wing above are each caught."""
    bad = tmp_path / "m.py"
    bad.write_text("from pipeline import seeds, sources\nfrom pipeline.beam import spill\nimport pipeline\n\n\n"
                   "def f():\n    from pipeline.output import output\n    import pipeline.run\n"
                   "    from pipeline.progress import Shown\n    from ..output.disk import NoSpace\n"
                   "    from pipeline.hashing import stable_int\n")
    names = imported_modules(bad, ("pipeline", "beam"))
    assert above_its_wing(names, wing_of("pipeline.beam.job")) == [
        "pipeline.output", "pipeline.output.disk", "pipeline.output.disk.NoSpace", "pipeline.output.output",
        "pipeline.progress", "pipeline.progress.Shown", "pipeline.run"]
    assert above_its_wing(names, wing_of("pipeline.run")) == []
    assert wing_of("pipeline") is None and wing_of("contract.schema") is None


@pytest.mark.parametrize("package", ["pipeline", *WING_FOLDERS])
def test_the_pipeline_wings_hold_no_circle(package):
    cycles = import_cycles(package)
    assert not cycles, f"{package}/ modules that import each other in a circle: {cycles}"


@pytest.mark.parametrize("package", ["contract", "jobs", "training", "training/train", "training/finetune", "pipeline",
                                     *WING_FOLDERS])
def test_the_package_index_lists_every_module(package):
    """Each package's docstring indexes its modules (and subpackages), one line each."""
    folder = ROOT / package
    listed = INDEX_LINE.findall(ast.get_docstring(ast.parse((folder / "__init__.py").read_text()), clean=False) or "")
    present = ({p.name for p in folder.glob("*.py") if p.name != "__init__.py"}
               | {f"{p.parent.name}/" for p in folder.glob("*/__init__.py")})
    twice = sorted({n for n in listed if listed.count(n) > 1})
    assert set(listed) == present and not twice, (
        f"{package}/__init__.py's index: missing {sorted(present - set(listed))}, no such module "
        f"{sorted(set(listed) - present)}, listed twice {twice}")


def import_cycles(package: str) -> list[list[str]]:
    """The circles of imports among `package`'s own modules (deferred imports included), each as
    the modules around it, smallest first; [] when its imports run one way."""
    folder = ROOT / package
    prefix = package.replace("/", ".")
    modules = {f"{prefix}.{p.stem}": p for p in folder.glob("*.py") if p.name != "__init__.py"}
    edges = {m: {n for n in imported_modules(p) if n in modules and n != m} for m, p in modules.items()}
    cycles, seen = [], set()
    for start in sorted(edges):  # a depth-first walk from each module back to itself
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(edges[node]):
                if nxt == start:
                    key = frozenset(path)
                    if key not in seen:
                        seen.add(key)
                        cycles.append(path)
                elif nxt not in path and nxt > start:
                    stack.append((nxt, path + [nxt]))
    return sorted(cycles, key=len)


def test_the_commands_import_one_way():
    """jobs/: the sub-commands import the helpers they share (errors, quiet, logs, flags), never
    the other way; cli.py reaches the sub-commands through importlib, by the table in commands.py."""
    cycles = import_cycles("jobs")
    assert not cycles, f"jobs/ modules that import each other in a circle: {cycles}"


def test_the_cycle_check_sees_a_circle(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("from pkg import b\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    from pkg.c import x\n")
    (tmp_path / "pkg" / "c.py").write_text("import pkg.a\n")
    (tmp_path / "pkg" / "d.py").write_text("from pkg import a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert import_cycles("pkg") == [["pkg.a", "pkg.b", "pkg.c"]]
