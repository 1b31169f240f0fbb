"""An output: what the job staged, published exactly once, and checked against the contract.

One idea per module:
    output.py     an output's format and staging, and publishing it exactly once
    disk.py       the staging's disk: its peak estimated before the job, a full disk in one line
    validate.py   `canine validate DIR`: an output against the contract and its own manifest

The wing above the job: publishing reads what the job staged (its stats as pipeline/beam's
elements.Stat, its item caches by itemcache's names), and validate.py checks rows by the rules of
pipeline/rows and the split of pipeline/beam/split.py. Nothing below imports it; pipeline/run.py
and the `canine` commands do.
"""
