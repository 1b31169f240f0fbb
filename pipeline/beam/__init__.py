"""The Beam job: its graph of labelled steps, what flows between them, and the runners that run it.

One idea per module:
    job.py                the Beam job, a chain of labelled composite transforms
    elements.py           the named elements that flow between its steps
    itemcache.py          per-work-item results, so a killed run resumes without parsing again
    tally.py              a work item's counts per language: what travels instead of its pages
    split.py              the validation split: which of a language's kept pages are held out
    spill.py              shuffles through Arrow IPC files in staging: batches per key, references through Beam
    tokenizer_sample.py   the vocabulary's bottom-k sample, in chunks, in bounded memory
    stats.py              the job's accounting, per language
    memory.py             a finished step's memory given back: a worker holds its largest step, not their sum
    phases.py             where a run's time goes: each step's units timed, when asked (benchmarks/phases.py)
    runners.py            which Beam runner runs the job, with which options
    direct_runner.py      Beam's DirectRunner with worker processes, which start ignoring Ctrl-C
    dask_runner.py        Beam's DaskRunner, mended

The steps call pipeline/sources (pages), pipeline/wikitext (their text) and pipeline/rows (the
rows they make); nothing below imports this package. Beam is imported by job.py, elements.py,
stats.py, direct_runner.py and dask_runner.py (runners.py when it builds options): split.py and tally.py are plain
Python, so `canine validate` reads the split's rule without it, and importing this package
imports none of them.
"""
