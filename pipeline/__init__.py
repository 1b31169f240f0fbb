"""Preprocessing: Wikipedia dumps (or cleaned JSONL / Parquet) -> the shard contract (contract/).

One idea per module:
    run.py                `preprocess(cfg)`: the driver (`--dump` resolution, runner checks, the output lock, the job run)
    preprocess_config.py  the configuration: everything that decides the bytes of the output
    sources/              inputs: work items planned from globs, pages streamed out of each; Wikimedia's dump naming
    wikitext/             wikitext -> plain text, every drop counted with its reason
    job.py                the Beam job, a chain of labelled composite transforms
    elements.py           the named elements that flow between its steps
    tally.py              a work item's counts per language: what travels instead of its pages
    spill.py              shuffles through files in staging: row groups per key, references through Beam
    tokenizer_sample.py   the vocabulary's bottom-k sample, in chunks, in bounded memory
    rows/                 what makes a row: packed examples, mask plans, the vocabulary, Parquet shards
    seeds.py              every random decision of the pipeline; hashing.py the stable hashes they mix
    stats.py              the job's accounting, per language
    itemcache.py          per-work-item results, so a killed run resumes without parsing again
    output.py             an output's format and staging, and publishing it exactly once
    runners.py            which Beam runner runs the job, with which options; dask_runner.py Beam's DaskRunner, mended
    progress.py           what a run shows while it works
    disk.py               the staging's disk: its peak estimated before the job, a full disk in one line
    memory.py             a finished step's memory given back: a worker holds its largest step, not their sum
    validate.py           `canine validate DIR`: an output against the contract and its own manifest
    synthetic.py          synthetic rows and shard directories for tests, benchmarks and smoke runs
    faults.py             kill points for the crash tests

Importing this package is cheap: Beam, Dask and pyarrow are imported by the modules that use them.
"""
