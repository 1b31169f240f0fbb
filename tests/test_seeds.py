"""One module per side owns the randomness: pipeline/seeds.py and training/seeds.py.

Each opens with the table of its side's random decisions; these tests hold the code to it:
  * the stream numbers and hash names are distinct, allocated in one place each;
  * no other module of pipeline/ or training/ seeds a generator, builds one, or calls a mix
    (read from the source, as tests/test_layers.py reads imports), except the few listed in
    ALLOWED with why;
  * every decision gives the values it gave before the modules existed (pinned), in any process:
    shards and batches already made stay what they are;
  * the global generators are seeded as the tables say (torchtitan's set_determinism has a test
    of its own too: tests/unit_tests/test_set_determinism.py there).
Draws from an already seeded global generator (nn.init in training/model.py, dropout in
training/kernels.py) are not seeding and are not flagged.
"""

import ast
import os
import random
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from pipeline import seeds as pipeline_seeds
from pipeline.hashing import stable_int, stable_unit
from training import seeds as training_seeds

ROOT = Path(__file__).resolve().parents[1]
SEEDS = {"pipeline/seeds.py", "training/seeds.py"}
# Calls and imports that seed, build a generator, or mix: only the seeds modules make them.
GENERATORS = ("np.random.", "numpy.random.", "random.", "torch.random.", "torch.cuda.manual_seed")
MIXES = {"default_rng", "SeedSequence", "RandomState", "Generator", "PCG64", "manual_seed", "manual_seed_all",
         "splitmix64", "unit_floats", "stable_int", "stable_unit", "crc32", "blake2b"}
MIX_MODULES = ("contract.splitmix", "pipeline.hashing", "numpy.random", "random")
# Module -> the flagged names it may use, and why.
ALLOWED = {
    # the blake2b mix itself, which pipeline/seeds.py draws through
    "pipeline/hashing.py": {"hashlib.blake2b", "stable_int"},
    # a cache file's name: a content address of its work item, not a decision
    "pipeline/beam/itemcache.py": {"from pipeline.hashing", "stable_int"},
    # a work item's progress file's name: a content address of the item, not a decision
    "pipeline/sources/plan.py": {"hashlib.blake2b"},
    # GOLDEN for Fibonacci hashing in a hash table of words: draws nothing
    "pipeline/rows/wordspans.py": {"from contract.splitmix"},
    # made the bundled sample's text once, offline (random.Random per language); not run by the job
    "pipeline/sample/generate.py": {"import random", "random.Random"},
    # saves and restores the global generators' states with a checkpoint; seeds nothing
    "training/train/checkpoint.py": {"import random", "np.random.get_state", "np.random.set_state",
                                     "random.getstate", "random.setstate"},
}


def _dotted(node) -> str | None:
    """"np.random.default_rng" for the expression np.random.default_rng; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def flagged(path: Path) -> set[str]:
    """The seeding, generator and mix calls and imports of a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and (name := _dotted(node.func)):
            if name.startswith(GENERATORS) or name.rpartition(".")[2] in MIXES:
                found.add(name)
        elif isinstance(node, ast.Import):
            found.update(f"import {a.name}" for a in node.names if a.name in MIX_MODULES)
        elif isinstance(node, ast.ImportFrom) and node.module in MIX_MODULES:
            found.add(f"from {node.module}")
    return found


def side_modules():
    return sorted(p for side in ("pipeline", "training") for p in (ROOT / side).rglob("*.py"))


def test_the_stream_numbers_and_names_are_distinct():
    for stream in (pipeline_seeds.Stream, training_seeds.Stream, training_seeds.Tag):  # aliases (a repeated value) show here only
        values = [m.value for m in stream.__members__.values()]
        assert len(set(values)) == len(values) and min(values) >= 1, stream
    names = [m.value for m in pipeline_seeds.Name.__members__.values()]
    assert len(set(names)) == len(names) and all(names)
    assert str(pipeline_seeds.Name.SPLIT) == "split"  # what the hash sees: the value, not "Name.SPLIT"


def test_the_tables_name_every_function_and_stream():
    for module in (pipeline_seeds, training_seeds):
        table = module.__doc__
        streams = [f"{m.name} {m.value}" for m in [*module.Stream, *getattr(module, "Tag", ())]]
        public = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                  and getattr(v, "__module__", None) == module.__name__ and n not in ("Name", "Stream", "Tag")]
        missing = [n for n in streams + public if n not in table]
        assert not missing, f"{module.__name__}: not in its table: {missing}"
    missing = [name.value for name in pipeline_seeds.Name if f'hash "{name.value}"' not in pipeline_seeds.__doc__]
    assert not missing, f"hash names not in pipeline/seeds.py's table: {missing}"


def test_no_other_module_seeds_or_mixes():
    wrong = {}
    for path in side_modules():
        rel = str(path.relative_to(ROOT))
        if rel in SEEDS:
            continue
        extra = flagged(path) - ALLOWED.get(rel, set())
        if extra:
            wrong[rel] = sorted(extra)
    assert not wrong, f"draw through pipeline/seeds.py or training/seeds.py (add the decision to its table): {wrong}"


def test_every_exception_is_still_needed():
    """An exception that is no longer used comes off the list, so it cannot hide a new draw."""
    for rel, names in ALLOWED.items():
        assert names <= flagged(ROOT / rel), (rel, sorted(names - flagged(ROOT / rel)))


def test_the_check_sees_a_violation(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("import numpy as np\nfrom contract.splitmix import splitmix64\n\n\ndef f(seed):\n"
                   "    import torch\n    torch.manual_seed(seed)\n    return np.random.default_rng(seed).random()\n")
    assert flagged(bad) == {"from contract.splitmix", "torch.manual_seed", "np.random.default_rng"}


# --- the values: what every shard and batch already made was drawn with ------------------------
def test_the_pipeline_decisions_keep_their_values():
    s = pipeline_seeds
    assert s.split_hash("en", 5) == 13295648526023085428 == stable_int("split", "en", 5)
    assert s.tokenizer_rank("en", 5) == 12230090428724992930
    assert s.pack_group("en", 5, 7) == 4
    assert [s.sop_swapped(0, 12, 1), s.sop_swapped(0, 12, 2), s.sop_swapped(0, 13, 0)] == [False, True, False]
    assert s.copy_draw(0, "ko", 12, 1) == 0.05461454257861452 == stable_unit("copy", 0, "ko", 12, 1)
    assert s.mask_key(7, "en", 123, 4, 1) == 3272355688455418254
    assert s.shard_index("en-123-4-1", 5) == 0 and s.row_order_key("en-123-4-1") == 11444461403476778527
    u = s.CounterUniforms([s.mask_key(7, "en", 123, 4, 1), s.mask_key(7, "de", 9, 0, 0)])
    assert [u(stream, np.array([1]), np.array([5]))[0] for stream in s.Stream] == [
        0.917657087331913, 0.4669668206863803, 0.9620466589106119, 0.38219340592290185, 0.896375435788112]
    assert s.mask_rng(7, "en", 123, 4, 1).integers(0, 1 << 30, size=3).tolist() == [191858276, 176538116, 283547284]
    assert s.synthetic_rng(3).integers(0, 1000, size=3).tolist() == [811, 85, 179]


def test_the_training_decisions_keep_their_values():
    s = training_seeds
    keys = s.example_keys(["en-123-4-1"])
    assert keys.tolist() == [2206146719] == [zlib.crc32(b"en-123-4-1")] and keys.dtype == np.uint64
    assert [s.batch_uniform(11, keys, np.array([7]), stream)[0] for stream in s.Stream] == [
        0.07329667903787251, 0.34881008454120765, 0.6480836951429959, 0.5083206520361417, 0.3360024143017446]
    assert [s.build_seed(0, 0), s.build_seed(0, 3), s.build_seed(5, None)] == [1855958221, 1169358606, 633854825]
    # Pinned anew when the SeedSequence decisions got their tags (CHANGELOG.md).
    assert [s.dropout_seed(0, 3, 1), s.dropout_seed(7, 0, 0)] == [2695413646421210615, 8995600287511374582]
    assert s.unit_order(0, 1, 10).tolist() == [0, 3, 6, 5, 2, 1, 8, 4, 9, 7]
    assert s.row_order(s.row_order_seed(0, 1, 2, 64), 8).tolist() == [6, 2, 5, 3, 7, 1, 0, 4]
    assert s.probe_rng().integers(97, 123, size=4).tolist() == [119, 113, 110, 104]


def test_no_two_seedsequence_decisions_share_a_stream():
    """A SeedSequence pads its entropy with zeros: without a tag of its own per decision, an epoch's
    unit order ([seed, epoch]) and the rows of the unit at row 0 of shard 0 ([seed, epoch, 0, 0])
    were permutations of one stream, and dropout's [seed, step, 0] the first word of it."""
    s = training_seeds
    for seed, epoch in ((0, 1), (7, 0), (3, 2)):
        units = s.unit_order(seed, epoch, 64).tolist()
        assert units != s.row_order(s.row_order_seed(seed, epoch, 0, 0), 64).tolist()
        assert units != s.row_order(s.row_order_seed(seed, epoch, 0, 0) + [0], 64).tolist()
        first = np.random.SeedSequence([seed, epoch]).generate_state(1, np.uint64)[0] >> 1
        assert s.dropout_seed(seed, epoch, 0) != first
    states = [tuple(np.random.SeedSequence(list(e)).generate_state(4)) for e in (
        [int(s.Tag.DROPOUT), 0, 1, 0], [int(s.Tag.UNIT_ORDER), 0, 1], s.row_order_seed(0, 1, 0, 0))]
    assert len(set(states)) == 3


def test_the_decisions_are_the_same_in_another_process(tmp_path):
    """Python's hash() is salted per process (PYTHONHASHSEED); no decision may depend on it."""
    code = ("from pipeline import seeds as p; from training import seeds as t; "
            "print(p.mask_rng(7, 'en', 123, 4, 1).integers(0, 1 << 30, size=4).tolist(), p.split_hash('de', 3), "
            "p.sop_swapped(1, 5, 0), t.build_seed(2, 1), t.example_keys(['de-3-0-0']).tolist())")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                         cwd=tmp_path)
    here = (pipeline_seeds.mask_rng(7, "en", 123, 4, 1).integers(0, 1 << 30, size=4).tolist(),
            pipeline_seeds.split_hash("de", 3), pipeline_seeds.sop_swapped(1, 5, 0), training_seeds.build_seed(2, 1),
            training_seeds.example_keys(["de-3-0-0"]).tolist())
    assert out.stdout.strip() == " ".join(map(str, here))
    assert here[0] != pipeline_seeds.mask_rng(7, "en", 123, 4, 2).integers(0, 1 << 30, size=4).tolist()  # copy
    assert here[0] != pipeline_seeds.mask_rng(7, "de", 123, 4, 1).integers(0, 1 << 30, size=4).tolist()  # lang


# --- the global generators ----------------------------------------------------------------------
def _draws():
    import torch

    return torch.rand(3).tolist(), np.random.rand(3).tolist(), [random.random() for _ in range(3)]


def test_seed_all_and_seed_worker_seed_every_global_generator():
    torch = pytest.importorskip("torch")
    saved = torch.get_rng_state(), np.random.get_state(), random.getstate()
    try:
        training_seeds.seed_all(5)
        first = _draws()
        training_seeds.seed_all(5)
        assert _draws() == first
        training_seeds.seed_worker(5, 0)
        rank0 = _draws()
        training_seeds.seed_worker(5, 1)
        rank1 = _draws()
        assert all(a != b for a, b in zip(rank0, rank1)) and all(a != b for a, b in zip(rank0, first))
        training_seeds.seed_all(5 * 1_000_003 + 1)  # what seed_worker(5, 0) stands for
        assert _draws() == rank0
        training_seeds.seed_dropout(0, 3, 1)
        dropout = torch.rand(4)
        torch.manual_seed(2695413646421210615)  # dropout_seed(0, 3, 1), pinned above
        assert torch.equal(torch.rand(4), dropout)
        training_seeds.seed_dropout(0, 3, 2)
        assert not torch.equal(torch.rand(4), dropout)
    finally:
        torch.set_rng_state(saved[0])
        np.random.set_state(saved[1])
        random.setstate(saved[2])
