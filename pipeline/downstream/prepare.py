"""`prepare(inputs, output)`: TyDi QA's official files -> Parquet windows per role, published once.

    from pipeline.downstream.prepare import prepare
    from pipeline.downstream.windows import WindowSettings
    manifests = prepare({"train": ["tydiqa-v1.0-train.jsonl.gz"], "dev": ["tydiqa-v1.0-dev.jsonl.gz"]},
                        "out/tydiqa", WindowSettings(), workers=2, say=print)
    manifests["dev"]["shards"]        # [{path, rows, bytes, sha256}], under out/tydiqa/dev/

The output, per role: OUTPUT/ROLE/part-i-of-n.parquet (contract/tydiqa.py's window rows) and
OUTPUT/ROLE/_manifest.json, written last: the settings, the inputs (URL, bytes, sha256), the
counts (examples read, windowed and rejected by reason, by label; windows written by answer type
and dropped by reason) and the shards with their rows. The train role is windowed for training
(`training_roles`), the others for prediction (every window kept).

Like `canine preprocess` (pipeline/output/output.py): the job writes only below
OUTPUT/.staging-tydiqa-<sha>/ (a name Parquet readers skip), under the output's lock
(contract/lock.py); then each role's files are moved into place and its manifest written last,
so a role without a manifest is never complete, and a killed run is run again from the start (its
staging removed). A role whose manifest was made from the same input bytes and settings is
already prepared: said, and not run again (`up_to_date` in what is returned). One made from other
settings or other inputs is refused (OutputExistsError, naming what differs) before anything is
written: remove OUTPUT/ROLE or choose another output.

The runner is set up as the preprocessing job's (pipeline/beam/runners.py beam_options: the
DirectRunner in_memory for one worker, its multi_processing mode with worker processes that ignore
Ctrl-C for more, never Prism; pipeline/run.py's worker plugins and Ctrl-C handling).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from collections import Counter

import fsspec

from contract.files import file_sha256, is_local, redact, save_json
from contract.tydiqa import (WINDOW_COLUMN_NAMES, WINDOW_SCHEMA_VERSION, WINDOWS_FORMAT, WINDOWS_MANIFEST, AnswerType,
                             read_windows_manifest)
from pipeline.beam import spill
from pipeline.downstream.windows import WindowSettings, nested
from pipeline.output.output import OutputExistsError, PublishError
from pipeline.sources import InputError

FORMAT = WINDOWS_FORMAT
STAGING = ".staging-tydiqa-"
TRAINING_ROLES = ("train",)


def _fs(url: str):
    fs, path = fsspec.core.url_to_fs(url)
    return fs, path.rstrip("/")


def describe_inputs(paths) -> list[dict]:
    """{url, bytes, sha256} of each input file, in the order given (sha256 read whole, streamed)."""
    out = []
    for path in paths:
        fs, p = fsspec.core.url_to_fs(path)
        if not fs.exists(p):
            raise FileNotFoundError(f"{path}: no such file (a TyDi QA primary-task file, .jsonl or .jsonl.gz)")
        out.append({"url": redact(path if "://" in path else os.path.normpath(path)),
                    "bytes": int(fs.info(p).get("size") or 0), "sha256": file_sha256(path)})
    return out


def identity(settings: WindowSettings, mode: str, inputs: list[dict], shard_input_bytes: int) -> dict:
    """What decides a role's bytes: the settings, its mode, the shard size and the inputs' bytes
    (sizes and sha256 in order, not their names: a copy elsewhere is the same input)."""
    return {"format": FORMAT, "version": WINDOW_SCHEMA_VERSION, "settings": settings.to_dict(), "mode": mode,
            "shard_input_bytes": shard_input_bytes, "inputs": [[i["bytes"], i["sha256"]] for i in inputs]}


def identity_sha256(ident: dict) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def describe_change(old: dict, new: dict) -> str:
    changes = [f"{k}: {old['settings'].get(k)!r} -> {v!r}" for k, v in new["settings"].items()
               if old["settings"].get(k) != v]
    for key in ("mode", "shard_input_bytes", "version"):
        if old.get(key) != new.get(key):
            changes.append(f"{key}: {old.get(key)!r} -> {new.get(key)!r}")
    if old["inputs"] != new["inputs"]:
        changes.append("the input files' bytes differ (sizes and sha256)")
    return "; ".join(changes) or "the identities differ"


def read_role_manifest(output: str, role: str) -> dict | None:
    """A role's manifest (contract/tydiqa.py read_windows_manifest), None if it has none."""
    try:
        return read_windows_manifest(output, role)
    except FileNotFoundError:
        return None


def _summary(role: str, m: dict) -> str:
    c = m["counts"]
    ex, rejected = c.get("examples", {}), c.get("rejected", {})
    written, dropped = c.get("windows", {}), c.get("dropped", {})
    types = ", ".join(f"{t.name} {written[t.name]:,}" for t in AnswerType if written.get(t.name))
    line = (f"{role}: {ex.get('read', 0):,} examples read, {ex.get('windowed', 0):,} windowed"
            + (f", rejected: {', '.join(f'{r} {n:,}' for r, n in rejected.items())}" if rejected else "")
            + f"; {m['rows']:,} windows written ({types or 'none'}) in {len(m['shards'])} of {m['shard_count']} shards")
    if dropped:
        line += f"; dropped: {', '.join(f'{r} {n:,}' for r, n in dropped.items())}"
    return line


class _Progress:
    """Says every `every_s` how far the job is: examples read into chunks and windows written,
    from the file names in staging (job.py ends each chunk's name with its examples and each
    window file's with its rows), one listing per folder."""

    def __init__(self, staging: str, say, every_s: float):
        self.staging, self.say, self.every_s = staging, say, every_s
        self._stop, self._last = threading.Event(), None
        self._thread = threading.Thread(target=self._run, name="canine-tydiqa-progress", daemon=True)

    def counts(self) -> tuple[int, int]:
        fs, root = _fs(self.staging)
        totals = []
        for folder in ("chunks", "windows"):
            fs.invalidate_cache(f"{root}/{folder}")
            try:
                names = fs.find(f"{root}/{folder}")
            except FileNotFoundError:
                names = []
            names = [n.rsplit("/", 1)[-1] for n in names]  # atomic_write's temp files start with "."
            totals.append(sum(int(n.rsplit("-", 1)[-1].split(".")[0]) for n in names
                              if n.endswith(spill.SUFFIX) and not n.startswith(".")))
        return totals[0], totals[1]

    def _run(self):
        while not self._stop.wait(self.every_s):
            self.note()

    def note(self):
        now = self.counts()
        if now != self._last:
            self._last = now
            self.say(f"{now[0]:,} examples read, {now[1]:,} windows written so far")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, exc_type, *exc):
        self._stop.set()
        self._thread.join()
        if exc_type is None:  # the totals, once: a short run says them too
            self.note()


def prepare(inputs: dict, output: str, settings: WindowSettings = WindowSettings(), *, workers: int = 1,
            runner: str = "DirectRunner", beam_args=(), say=None, training_roles=TRAINING_ROLES,
            shard_input_bytes: int | None = None, chunk_bytes: int | None = None,
            progress_every_s: float = 10.0) -> dict:
    """Window TyDi QA's files per role ({role: [paths]}) into `output`; returns {role: manifest},
    each with `up_to_date` (True: it was prepared already, nothing ran for it). `say(line)` is
    told what happens. OutputExistsError for a role made with other settings or inputs."""
    from contract.lock import OutputLock
    from pipeline.downstream import job

    say = say or (lambda line: None)
    settings.validate()
    if workers < 1:
        raise ValueError(f"workers {workers}: must be 1 or more")
    if not inputs or any(not paths for paths in inputs.values()):
        raise ValueError(f"inputs {inputs!r}: give each role one or more files")
    for role in inputs:
        if not role or "/" in role or role.startswith((".", "_")):
            raise ValueError(f"role {role!r}: a plain folder name (train, dev, ...)")
    shard_input_bytes = shard_input_bytes or job.SHARD_INPUT_BYTES
    fs, root = _fs(output)
    if fs.isfile(root):
        raise ValueError(f"{output} is a file; the output must be a folder (or not exist yet)")

    # Everything that can refuse comes before the lock creates the output folder.
    plans, done = {}, {}
    for role in sorted(inputs):
        described = describe_inputs(inputs[role])
        mode = "training" if role in training_roles else "prediction"
        ident = identity(settings, mode, described, shard_input_bytes)
        existing = read_role_manifest(output, role)
        if existing is not None:
            if existing.get("identity_sha256") != identity_sha256(ident):
                raise OutputExistsError(
                    f"{output.rstrip('/')}/{role} already holds windows made otherwise: "
                    f"{describe_change(existing['identity'], ident)}; choose another output or remove "
                    f"{output.rstrip('/')}/{role} first")
            done[role] = existing | {"up_to_date": True}
            say(f"{role}: already prepared ({existing['rows']:,} windows in {len(existing['shards'])} shards); "
                "nothing to do")
            continue
        plans[role] = (described, mode, ident)
    if not plans:
        return done

    shards = {role: job.shards_for(sum(i["bytes"] for i in d), shard_input_bytes) for role, (d, _, _) in plans.items()}
    run_sha = identity_sha256({role: plans[role][2] for role in sorted(plans)})
    with OutputLock(output, command=f"canine tydiqa windows {' '.join(sorted(plans))} -> {redact(output)}") as lock:
        for old in _stagings(output):  # a killed run's: nothing in it is reused
            fs.rm(old, recursive=True)
        staging = f"{root}/{STAGING}{run_sha[:16]}"
        fs.makedirs(staging, exist_ok=True)
        staging_url = fs.unstrip_protocol(staging)
        started = time.time()
        what = ", ".join(f"{r} ({_files(len(inputs[r]))}, {sum(i['bytes'] for i in plans[r][0]) / 1e6:.1f} MB)"
                         for r in sorted(plans))
        say(f"windowing {what} with {workers} worker{'s' * (workers != 1)} ...")
        try:
            with _Progress(staging_url, say, progress_every_s):
                _run_job(lambda p: job.build(p, {r: inputs[r] for r in plans}, staging_url, settings,
                                             [r for r in plans if plans[r][1] == "training"], shards,
                                             chunk_bytes or job.CHUNK_BYTES), workers, runner, list(beam_args))
        except InputError:  # nothing staged is of use once the input is fixed
            fs.rm(staging, recursive=True)
            raise
        lock.check()
        fs.invalidate_cache()
        counts = job.read_counts(fs.cat_file(f"{staging}/counts.json").decode())
        records = json.loads(fs.cat_file(f"{staging}/shards.json"))
        for role in sorted(plans):
            described, mode, ident = plans[role]
            manifest = _publish(fs, root, staging, role, [r for r in records if r["role"] == role],
                                counts.get(role, Counter()), described, mode, ident, settings, shards[role])
            done[role] = manifest | {"up_to_date": False}
            say(_summary(role, manifest))
        fs.rm(staging, recursive=True)
        say(f"done in {time.time() - started:.1f} s: {redact(output)}")
    return {role: done[role] for role in sorted(done)}


def _files(n: int) -> str:
    return f"{n} file{'s' * (n != 1)}"


def _stagings(output: str) -> list[str]:
    fs, root = _fs(output)
    fs.invalidate_cache(root)
    if not fs.isdir(root):
        return []
    return [n.rstrip("/") for n in fs.ls(root, detail=False) if n.rstrip("/").rsplit("/", 1)[-1].startswith(STAGING)]


def check_counts(counts: Counter, rows: int) -> None:
    """The accounting identities; RuntimeError if one fails (a bug, never the input's fault)."""
    rejected = sum(n for (g, _), n in counts.items() if g == "rejected")
    if counts["examples", "read"] != counts["examples", "windowed"] + rejected:
        raise RuntimeError(f"examples read {counts['examples', 'read']} != windowed {counts['examples', 'windowed']} "
                           f"+ rejected {rejected}")
    if (labelled := sum(n for (g, _), n in counts.items() if g == "labels")) != counts["examples", "windowed"]:
        raise RuntimeError(f"examples by label {labelled} != windowed {counts['examples', 'windowed']}")
    if (written := sum(n for (g, _), n in counts.items() if g == "windows")) != rows:
        raise RuntimeError(f"windows counted {written} != rows in the shards {rows}")


def _publish(fs, root, staging, role, records, counts, described, mode, ident, settings, shard_count) -> dict:
    rows = sum(r["rows"] for r in records)
    check_counts(counts, rows)
    folder = f"{root}/{role}"
    if fs.exists(folder):  # files of a killed run's publish: this role has no manifest, or we would not be here
        fs.rm(folder, recursive=True)
    fs.makedirs(folder, exist_ok=True)
    shards = []
    for r in sorted(records, key=lambda r: r["path"]):
        src, dst = f"{staging}/{r['path']}", f"{root}/{r['path']}"
        if fs.info(src)["size"] != r["bytes"]:
            raise PublishError(f"{fs.unstrip_protocol(src)} is not the {r['bytes']} bytes the job wrote; nothing of "
                               f"{role} was published: run the same command again")
        if is_local(fs):
            fs.mv(src, dst)
        else:  # object stores: a server-side copy (staging is removed after the manifests)
            fs.cp_file(src, dst)
        shards.append({"path": r["path"].split("/", 1)[1], "rows": r["rows"], "bytes": r["bytes"],
                       "sha256": r["sha256"]})
    manifest = {
        "format": FORMAT, "version": WINDOW_SCHEMA_VERSION, "role": role, "mode": mode,
        "columns": list(WINDOW_COLUMN_NAMES), "settings": settings.to_dict(), "inputs": described,
        "identity": ident, "identity_sha256": identity_sha256(ident),
        "counts": nested(counts), "rows": rows, "shard_count": shard_count, "shards": shards,
    }
    save_json(manifest, fs.unstrip_protocol(f"{folder}/{WINDOWS_MANIFEST}"))  # last: the role is complete
    return manifest


def _run_job(build, workers: int, runner: str, beam_args: list) -> None:
    """Build and run the job on the runner as `canine preprocess` runs its own (pipeline/run.py)."""
    import apache_beam as beam

    from pipeline import run
    from pipeline.beam import runners

    plugins = run._worker_plugins(runner, workers)
    options = runners.beam_options(workers, runner, [*beam_args, *plugins])
    p = beam.Pipeline(options=options)
    build(p)
    try:
        with run._launcher_pid_for_workers(), run._workers_stopped_on_ctrl_c(bool(plugins)):
            p.run().wait_until_finish()
    except KeyboardInterrupt:
        if plugins:
            run._stop_sdk_workers()
        raise
    except (RuntimeError, InputError) as e:  # a worker's InputError arrives wrapped: its own message again
        raise run._input_error_in(e) or e


def settings_of(manifest: dict) -> WindowSettings:
    """The WindowSettings a role's manifest was made with."""
    return WindowSettings(**{f.name: manifest["settings"][f.name] for f in dataclasses.fields(WindowSettings)})
