"""Downstream tasks' data: TyDi QA's official files -> Parquet windows that `canine finetune tydiqa` reads.

    windows.py    an example -> its windows (Google's CANINE recipe in codepoints), every outcome counted
    parquet.py    windows as Arrow tables, and the shard files of contract/tydiqa.py's window schema
    job.py        the Beam job: files read in chunks, windowed on every worker, written to shards by example id
    prepare.py    `prepare(inputs, output)`: the driver: identities, the lock, staging, publishing, manifests

The top wing of pipeline/ (tests/test_layers.py PIPELINE_WINGS): it reuses the job's runners
(beam/runners.py), its shuffles through files (beam/spill.py), the driver's Ctrl-C handling
(run.py) and an output's errors (output/output.py); nothing below imports it. The row contract
is contract/tydiqa.py's, which the training side reads. Importing this package imports none of
its modules; job.py imports Beam.
"""
