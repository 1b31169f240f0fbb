"""The validation split: which of a language's kept pages are held out. Beam-free: the job
(pipeline/beam/job.py ValidationCuts and the passes over the item caches), `canine validate`
(pipeline/output/validate.py) and the notes and hints about it (pipeline/output/output.py,
pipeline/run.py) read the rule from here.

Per language, the pages with the smallest split hashes (pipeline/seeds.py split_hash, not seeded:
the held-out pages stay the same when only the mask seed changes), as many as the language's
share (`validation_pages`, contract/holdout.py); `validation_cut` turns that into one number a language, and a page is
a validation page when its hash is below its language's cut.
"""

import math

from contract.holdout import MIN_PAGES_FOR_VALIDATION, validation_pages  # noqa: F401 (the rule, shared with training/)
from pipeline import seeds
from pipeline.beam.tally import EXACT_VALIDATION_PAGES

# Up to EXACT_VALIDATION_PAGES validation pages a language gets exactly its share, the pages with
# the smallest split hashes (a bottom-k sketch per language and work item, pipeline/beam/tally.py).
# Beyond it, "hash < fraction of the hash range" is already proportional within noise (a binomial
# count, one standard deviation 14% of it at 50 pages, 0.5% at enwiki's ~33,000 at 0.5%) and needs
# no per-language state; it too takes the smallest hashes.
HASH_SPACE = 1 << 64  # split_hash's range


def split_hash(lang: str, page_id) -> int:
    return seeds.split_hash(lang, page_id)


def validation_cut(kept: int, smallest: list[int], fraction: float) -> int:
    """A language's pages with split_hash < the cut are validation pages. `smallest`: its
    EXACT_VALIDATION_PAGES smallest split hashes (all of them if fewer), ascending."""
    k = validation_pages(kept, fraction)
    if k > EXACT_VALIDATION_PAGES:
        return int(fraction * HASH_SPACE)
    return smallest[k - 1] + 1 if k else 0


def split_of(lang: str, page_id, cuts: dict) -> str:
    """"validation" or "train", by the page's language's cut (no cut: train)."""
    return "validation" if split_hash(lang, page_id) < cuts.get(lang, 0) else "train"


def cuts_of(kept_and_cuts: dict) -> dict:
    """{lang: (kept pages, cut)} -> {lang: cut}."""
    return {lang: cut for lang, (_, cut) in kept_and_cuts.items()}


def fewest_training_pages(kept_and_cuts: dict, fraction: float) -> float:
    """A lower bound of the training pages the split leaves: for a language cut by hash, its
    validation count is binomial, so 6 standard deviations more are taken away."""
    train = 0.0
    for kept, _ in kept_and_cuts.values():
        held = validation_pages(kept, fraction)
        train += kept - held - (6 * math.sqrt(held) + 6 if held > EXACT_VALIDATION_PAGES else 0)
    return train
