"""The layer the pipeline and the trainer share: the shard contract and the few helpers both
sides need to honour it. `pipeline/` writes shards, `training/` reads them, `jobs/` (the `canine`
command) uses both; this package imports neither of them, nor Beam, torch or Ray, so the base
install (preprocessing) carries it whole.

    schema.py     the row's Arrow schema, special codepoints, masking limits, an output's file names
    manifest.py   `_manifest.json`'s typed record, its writer and its reader
    rows.py       the rules every row obeys (`canine validate` and the batch builder apply them)
    splitmix.py   SplitMix64, the mix of both sides' counter-based random numbers (their seeds.py)
    files.py      atomic_write, file_sha256, join, is_local, redact: files at any fsspec URL
    lock.py       the expiring lock on an output a run writes (preprocessing and pretraining)
    options.py    config fields with their help, and the one parser of settings given as text
    holdout.py    which pages of a language go to validation, and the fraction that holds some out
    extras.py     the pip command that installs an optional extra, for hints on both sides
    interrupted.py  Interrupted: Ctrl-C with what the run had done, raised by both drivers
    tydiqa.py     TyDi QA files -> examples in codepoints (exact byte offsets), and the windows' row contract

Importing the package imports none of its modules, so a command pays only for what it uses.
"""
