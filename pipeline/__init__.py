"""Preprocessing: Wikipedia dumps (or cleaned JSONL / Parquet) -> the shard contract (contract/).

One idea per module:
    run.py                `preprocess(cfg)`: the driver (`--dump` resolution, runner checks, the output lock, the job run)
    preprocess_config.py  the configuration: everything that decides the bytes of the output
    sources/              inputs: work items planned from globs, pages streamed out of each; Wikimedia's dump naming
    wikitext/             wikitext -> plain text, every drop counted with its reason
    beam/                 the Beam job: its labelled steps, the elements between them, the runners that run it
    rows/                 what makes a row: packed examples, mask plans, the vocabulary, Parquet shards
    seeds.py              every random decision of the pipeline; hashing.py the stable hashes they mix
    output/               an output: its format and staging, publishing it exactly once, its disk, `canine validate`
    progress.py           what a run shows while it works
    synthetic.py          synthetic rows and shard directories for tests, benchmarks and smoke runs
    faults.py             kill points for the crash tests

Importing this package is cheap: Beam, Dask and pyarrow are imported by the modules that use them.
"""
