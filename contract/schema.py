"""The shard contract, schema version 2: what one Parquet row holds, the special codepoints, the
masking plans' limits and the names of an output's files. The manifest's record is in
contract/manifest.py and the rules every row obeys in contract/rows.py.

One Parquet row (zstd) per example. Positions are absolute indices into `codepoints`
(position 0 is CLS). Data, constants, the Arrow schema and one small function; it imports
pyarrow only.

Special codepoints come from CANINE's private-use assignments (docs/canine.md "Input",
google-research/language canine/special_codepoints.py).
"""

import pyarrow as pa

# 2: the output's side files are named with a leading underscore (below); the rows are as in 1.
SCHEMA_VERSION = 2

# --- Special codepoints (private use area; PAD is 0) ---------------------------------
PAD = 0
CLS = 0xE000
SEP = 0xE001
BOS = 0xE002
MASK = 0xE003
RESERVED = 0xE004
# Any input character in this set could be confused with a special codepoint, so the
# cleaner replaces it with REPLACEMENT_CHARACTER and counts it (pipeline/wikitext/clean.py).
ALIASED_RANGE = (0xE000, 0xE0FF)  # inclusive, plus U+0000
REPLACEMENT_CHARACTER = 0xFFFD

# --- Masking plans (paper §3.2, §4.1.3) ------------------------------------------------
MASK_RATE = 0.15  # of whitespace spans (CANINE-C) or subwords (CANINE-S)
MAX_CHAR_PREDICTIONS = 320  # CANINE-C: at most 320 predicted characters per example
MAX_SUBWORD_PREDICTIONS = 80  # CANINE-S: at most 80 predicted subwords per example
# CANINE-S per-span action, stored in `subword_actions`: 80% / 10% / 10%.
ACTION_MASK = 0
ACTION_RANDOM = 1  # replaced by a random vocabulary subword of the same length in characters
ACTION_KEEP = 2
# BERT's split of the chosen subwords over those actions: the pipeline's default plan
# (pipeline/rows/masks.py) draws it, and the synthetic shards (pipeline/synthetic.py) through that plan.
SUBWORD_ACTION_SHARES = {ACTION_MASK: 0.8, ACTION_RANDOM: 0.1, ACTION_KEEP: 0.1}
# `sop_label`
SOP_IN_ORDER = 0
SOP_SWAPPED = 1
SOP_NO_PAIR = -1

DEFAULT_SEQ_LEN = 2048

# --- The output directory ----------------------------------------------------------------
# Only the split folders hold Parquet. Every other published name starts with "_": Parquet
# readers (pyarrow.dataset, pandas, Spark, HF datasets) skip names that start with "_" or ".",
# as they skip Spark's _SUCCESS and _metadata, so reading the output's root as a Parquet
# dataset gives exactly the manifest's rows. Run-time files (the lock, staging)
# start with ".".
SPLITS = ("train", "validation")
MANIFEST = "_manifest.json"
TOKENIZER = "_tokenizer.json"
REJECTS = "_rejects"
LOCK = ".canine.lock"  # held while a run writes the output (contract/lock.py); gone after it
STAGING_PREFIX = ".staging-"  # + config sha: a run's work in progress, removed when it publishes
LEGACY_MANIFEST = "manifest.json"  # schema 1's name, recognised only to say the output is too old

# Per-language accounting in the manifest. Identity: pages_read = sum(PAGE_OUTCOMES).
# disambiguation: articles that are a wiki's disambiguation pages (pipeline/wikitext/disambiguation.py),
# not kept unless the config says so; an output made before it counted them as kept.
PAGE_OUTCOMES = ("redirects", "non_article", "disambiguation", "parse_errors", "empty", "kept")
LANGUAGE_KEYS = ("pages_read",) + PAGE_OUTCOMES + (
    "examples",
    "sampling_weight",
    "replaced_characters",
)
# What kept pages lost in cleaning, per reason (pipeline/wikitext/clean.py), as each language's
# `dropped` in the manifest: constructs, not pages, so they are outside the identity above.
# references: <ref> citations and reference lists; templates: templates dropped without words
# (infoboxes apart); images: File/Image links with their captions; end_matter and
# empty_sections: headings dropped, with what was under them.
CONSTRUCT_DROPS = ("tables", "infoboxes", "galleries", "images", "references", "templates", "end_matter",
                   "empty_sections")

_i32 = pa.list_(pa.int32())
SCHEMA = pa.schema(
    [
        pa.field("example_id", pa.string(), nullable=False),  # unique across the output
        pa.field("lang", pa.string(), nullable=False),
        pa.field("page_ids", pa.list_(pa.int64()), nullable=False),  # pages whose text is in it
        pa.field("codepoints", _i32, nullable=False),  # unmasked input: CLS A SEP [B SEP], no padding
        pa.field("segment_ids", pa.list_(pa.int8()), nullable=False),  # same length as codepoints
        pa.field("sop_label", pa.int8(), nullable=False),  # SOP_* above
        pa.field("char_mask_positions", _i32, nullable=False),  # sorted; whole whitespace spans
        pa.field("subword_starts", _i32, nullable=False),  # absolute start of each chosen subword
        pa.field("subword_lengths", _i32, nullable=False),  # its length in characters
        pa.field("subword_ids", _i32, nullable=False),  # its id in tokenizer.json's vocabulary
        pa.field("subword_predict_offsets", _i32, nullable=False),  # offset inside the span, < length
        pa.field("subword_actions", pa.list_(pa.int8()), nullable=False),  # ACTION_* above
        # Codepoints of the replacement subwords, concatenated in order of the ACTION_RANDOM spans;
        # each replacement has exactly its span's length.
        pa.field("subword_replacements", _i32, nullable=False),
    ],
    metadata={b"canine.schema_version": str(SCHEMA_VERSION).encode()},
)
COLUMNS = tuple(SCHEMA.names)


def is_aliased(cp):
    """True if an input codepoint would alias PAD or a special codepoint; elementwise on an array."""
    return (cp == PAD) | ((ALIASED_RANGE[0] <= cp) & (cp <= ALIASED_RANGE[1]))
