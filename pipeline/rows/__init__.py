"""What makes a row of the shard contract: packed codepoints, mask plans, vocabulary, Parquet files.

One idea per module:
    examples.py    pages -> packed examples of codepoints
    masks.py       the mask plans of CANINE-C and CANINE-S, stored with each example
    tokenizer.py   the WordPiece vocabulary of CANINE-S
    wordspans.py   the vocabulary's subword spans, fast
    shards.py      rows <-> Arrow tables <-> Parquet files on any fsspec filesystem

Pure functions on numpy arrays and Arrow tables, no Beam: the job (pipeline/beam/job.py) wraps them in
its steps, and `canine validate` (pipeline/output/validate.py) checks an output against the same rules.
They import only each other, pipeline/seeds.py (every random decision) and contract/.
"""
