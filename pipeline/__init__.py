"""Preprocessing: Wikipedia dumps (or cleaned JSONL / Parquet) -> the shard contract (contract/).

In wings, from the ground up: a module imports only its own wing and those listed before it,
deferred imports included (tests/test_layers.py PIPELINE_WINGS holds the order).
    seeds.py              every random decision of the pipeline
    hashing.py            the stable hashes they mix
    faults.py             kill points for the crash tests
    sources/              inputs: work items planned from globs, pages streamed out of each; Wikimedia's dump naming
    wikitext/             wikitext -> plain text, every drop counted with its reason
    rows/                 what makes a row: packed examples, mask plans, the vocabulary, Parquet shards
    preprocess_config.py  the configuration: everything that decides the bytes of the output
    beam/                 the Beam job: its labelled steps, the elements between them, the runners that run it
    output/               an output: its format and staging, publishing it exactly once, its disk, `canine validate`
    synthetic.py          synthetic rows and shard directories for tests, benchmarks and smoke runs
    progress.py           what a run shows while it works
    run.py                `preprocess(cfg)`: the driver (`--dump` resolution, runner checks, the output lock, the job run)
    downstream/           downstream tasks' data: TyDi QA's files -> windows in Parquet (`prepare`), above the driver

Importing this package is cheap: Beam, Dask and pyarrow are imported by the modules that use them.
"""
