"""A preprocessing output: its format, its staging, and publishing it exactly once.

The Beam job writes only below `OUTPUT/.staging-<config sha>/` (a name Parquet readers skip).
After the pipeline succeeds, `finalize` checks the accounting, publishes exactly the files the
job recorded (the split shards, `_tokenizer.json`, `_rejects/`; a rename on a local disk, a
server-side copy on an object store), checks each one's size, writes `_manifest.json` last
(temp file and rename, or one whole-object write), and only then removes staging: the
work-item cache and any temp file never reach the published output. It lists no
folder and relies on no rename: object stores have neither. No manifest means no
usable output; an output that has one is never touched again except by a run of the very same
config, which is a no-op that also clears staging a run killed after publishing left behind
(a scheduled rerun, docs/schedule.md).

Crash safety: a run killed at any moment (reading, tokenizer training, writing, publishing)
leaves either no manifest, and the next run of the same config recomputes everything from the
cached work items, or a complete manifest; each step is idempotent from there
(tests/pipeline/test_crash.py kills a 2-worker run at each point). Ctrl-C is the same, told:
pipeline/run.py, which runs the job, raises contract's Interrupted naming the work items finished
(`items_done`), which the same command reuses.

Inputs are identified by content: an output is up to date for a run whose config differs from
its own only in how the inputs are named (the patterns as given, each file's URL: a relative
path, a copy elsewhere) and whose files have the same sizes and content ids (`data_identity`);
a given tokenizer counts by its text. A file whose bytes changed makes another config. So does a
trial slice (--max-pages: `max_pages` in the fingerprint), whose manifest also says in words that
it is one (`trial_slice`), never to be taken for the whole dump.

A run that keeps no training example publishes nothing: NothingKept (an input error: no
manifest, this config's staging removed by `canine preprocess`) names the pages read, the
outcomes that rejected them and the commonest reasons, so a scheduled run of a wrong input
fails instead of publishing an empty output as a success.
"""

import collections
import dataclasses
import hashlib
import json
import logging
import os
import re

import fsspec

from contract import schema
from contract.files import file_sha256, is_local, redact
from contract.manifest import FileRef, Language, Manifest, Shard, Split, write_manifest
from contract.manifest import read_manifest as _read_manifest
from pipeline import faults, sources
from pipeline.preprocess_config import PreprocessConfig

log = logging.getLogger(__name__)


class OutputExistsError(RuntimeError):
    """The output directory already holds a complete output made with another config."""


class PublishError(RuntimeError):
    """A file the job wrote to staging is missing or not what it recorded; no manifest was
    written, so the output is not usable and a rerun of the same command redoes the work."""


class NothingKept(sources.InputError):
    """The job made no training example (every page rejected, or none read): nothing was
    published. An input error: the input, not the run, has to change."""


def _fs(url):
    fs, path = fsspec.core.url_to_fs(url)
    return fs, path.rstrip("/")


def published_manifest(output: str) -> Manifest | None:
    """The manifest at `output`, None if there is none yet; OutputExistsError for schema 1's."""
    fs, root = _fs(output)
    if not fs.exists(f"{root}/{schema.MANIFEST}"):
        if fs.exists(f"{root}/{schema.LEGACY_MANIFEST}"):
            raise OutputExistsError(
                f"{output} was written by an older version (schema 1, {schema.LEGACY_MANIFEST}); "
                f"this one reads schema {schema.SCHEMA_VERSION} ({schema.MANIFEST}): run canine preprocess "
                "again into a new --output")
        return None
    return _read_manifest(output)


@dataclasses.dataclass(frozen=True)
class RunStats:
    """How a run went: returned and printed, never in the manifest (which must not depend on it)."""

    elapsed_s: float
    work_items: int
    items_parsed: int
    items_reused: int  # finished by an interrupted run of this config, read back from staging


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What pipeline/run.py `run_job` returns: the output's manifest, and whether and how this run made it."""

    manifest: Manifest
    up_to_date: bool = False  # the output was already complete for this config's data (existing_output): nothing ran
    run: RunStats | None = None
    # {lang: kept pages} of the languages that got no validation page in this run (not in to_dict)
    without_validation: dict = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        """The manifest's JSON data plus `run` / `up_to_date` when set: `canine preprocess --json`."""
        d = self.manifest.to_dict()
        if self.run is not None:
            d["run"] = dataclasses.asdict(self.run)
        if self.up_to_date:
            d["up_to_date"] = True
        return d


# Content checksums that object stores keep for every object: an input whose bytes are the
# same has the same value, whenever and however it was uploaded (S3 and GCS ETags of a
# single-part upload are its MD5; GCS also keeps md5Hash and crc32c).
_STORE_CHECKSUMS = ("md5Hash", "crc32c", "ETag", "etag", "checksum")


def _content_id(fs, path: str, info: dict) -> str:
    """What identifies an input's bytes. Local files: their sha256 (one sequential read, about
    1 GB/s here against the parser's ~4.5 MB/s, so a small share of a run), so a copy or
    `touch` that changes only the modification time changes nothing. Object
    stores: their own content checksum, without reading the object. Other filesystems
    (https mirrors): the modification time, the best they offer; a changed one is then named
    in the refusal (`describe_change`)."""
    if is_local(fs):
        return f"sha256:{file_sha256(fs.unstrip_protocol(path))}"
    for key in _STORE_CHECKSUMS:
        if info.get(key):
            return f"{key}:{str(info[key]).strip(chr(34))}"
    version = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or ""
    return f"mtime:{version}"


def fingerprint_inputs(items) -> tuple:
    """(url, size, content id) per input file: changed bytes give a different config sha,
    a changed modification time alone does not. A local path is recorded normalized
    (`cwd/../data/x.xml` as `data/x.xml`, absolute), as the manifest and a refusal show it."""
    out = []
    for path in sorted({i.path for i in items}):
        fs, p = fsspec.core.url_to_fs(path)
        info = fs.info(p)
        out.append((recorded_url(path), int(info.get("size") or 0), _content_id(fs, p, info)))
    return tuple(sorted(out))


def recorded_url(path: str) -> str:
    """An input file's URL as input_fingerprints records it: a local path normalized."""
    return path if "://" in path or "::" in path else os.path.normpath(path)


# Fingerprint fields that name where the inputs are, not what they hold (data_identity).
_NAMING = ("inputs", "tokenizer")


def data_identity(fingerprint: dict, tokenizer_sha256: str | None = None) -> dict:
    """A config fingerprint with the inputs identified by content alone: without the patterns
    as given and each file's URL, the files as sorted (size, content id) pairs, a given
    tokenizer as the sha256 of its text. Equal identities make the same shards (the rejects
    name each page's source by the path it was read from)."""
    d = {k: v for k, v in fingerprint.items() if k not in (*_NAMING, "input_fingerprints")}
    d["input_fingerprints"] = sorted([f[1], f[2]] for f in fingerprint.get("input_fingerprints", []))
    d["tokenizer"] = tokenizer_sha256 if fingerprint.get("tokenizer") else None
    return d


def text_sha256(text: str) -> str:
    """sha256 of a text as the job publishes it (contract.files.save_text: UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def describe_change(old: dict, new: dict, tokenizer_changed: bool = False) -> str:
    """What differs between two config fingerprints, input by input and field by field. An input
    found under another name with the same size and content id is no change."""
    changes = []
    before = {f[0]: f for f in old.get("input_fingerprints", [])}
    after = {f[0]: f for f in new.get("input_fingerprints", [])}
    # (size, content id) of the files each side names and the other does not: the same bytes
    # under another name on the other side are no change
    only_before = collections.Counter(tuple(before[u][1:]) for u in before.keys() - after.keys())
    only_after = collections.Counter(tuple(after[u][1:]) for u in after.keys() - before.keys())
    for url in sorted(before.keys() | after.keys()):
        a, b = before.get(url), after.get(url)
        if a is None:
            if only_before[tuple(b[1:])] > 0:
                only_before[tuple(b[1:])] -= 1
            else:
                changes.append(f"input {url} is new")
        elif b is None:
            if only_after[tuple(a[1:])] > 0:
                only_after[tuple(a[1:])] -= 1
            else:
                changes.append(f"input {url} is no longer given")
        elif a[1] != b[1]:
            changes.append(f"input {url} changed size ({a[1]} -> {b[1]} bytes)")
        elif a[2] != b[2]:
            changes.append(f"input {url} changed content ({a[2]} -> {b[2]})")
    if tokenizer_changed:
        changes.append(f"tokenizer {new.get('tokenizer') or old.get('tokenizer')} changed content")
    for key in sorted((old.keys() | new.keys()) - {*_NAMING, "input_fingerprints"}):
        if old.get(key) != new.get(key):
            changes.append(f"{key}: {old.get(key)!r} -> {new.get(key)!r}")
    if (old.get("tokenizer") is None) != (new.get("tokenizer") is None):
        changes.append(f"tokenizer: {old.get('tokenizer')!r} -> {new.get('tokenizer')!r}")
    return "; ".join(changes) or "the config hashes differ"


def check_output_path(output: str) -> None:
    """An output that is a file fails before anything is written."""
    fs, root = _fs(output)
    if fs.isfile(root):
        raise ValueError(f"--output {output} is a file; it must be a directory (or not exist yet)")


@dataclasses.dataclass(frozen=True)
class WorkPlan:
    """What `prepare` resolved: the config with its input fingerprints, the work items and a
    given tokenizer's text."""

    cfg: PreprocessConfig
    items: list
    tokenizer_json: str | None


def prepare(cfg: PreprocessConfig, workers: int | None = None) -> WorkPlan:
    """Everything that can fail before work starts and needs no lock: config, output path,
    input files, tokenizer. Writes nothing. `workers`: the items are sized to keep that many
    busy (sources/plan.py; the config, and so the output, does not change with it)."""
    cfg.validate()
    check_output_path(cfg.output)
    items = sources.plan_work_items(list(cfg.inputs), cfg.lang, cfg.streams_per_item, max_pages=cfg.max_pages,
                                    workers=workers)
    cfg = dataclasses.replace(cfg, inputs=tuple(cfg.inputs), input_fingerprints=fingerprint_inputs(items))
    tokenizer_json = None
    if cfg.tokenizer:
        try:
            with fsspec.open(cfg.tokenizer, "r", encoding="utf-8") as f:
                tokenizer_json = f.read()
        except FileNotFoundError:
            raise sources.InputError(f"--tokenizer {cfg.tokenizer}: no such file; give the {schema.TOKENIZER} of an "
                                     "earlier output, or leave --tokenizer out to train one") from None
    return WorkPlan(cfg, items, tokenizer_json)


def existing_output(cfg: PreprocessConfig, tokenizer_json: str | None = None) -> Manifest | None:
    """The manifest already at cfg.output if it was made from the same data (`data_identity`:
    this config, or one that names the same input bytes otherwise), None if there is none;
    OutputExistsError naming what changed if it was made by another. `tokenizer_json`: the
    text of cfg.tokenizer, compared with the tokenizer the output published."""
    existing = published_manifest(cfg.output)
    if existing is None:
        return None
    given = text_sha256(tokenizer_json) if cfg.tokenizer and tokenizer_json is not None else None
    published = existing.tokenizer.sha256 if existing.config.get("tokenizer") else None
    if data_identity(existing.config, published) != data_identity(cfg.fingerprint(), given or published):
        tokenizer_changed = bool(given and published and given != published)
        raise OutputExistsError(
            f"{cfg.output} already holds a complete output made with a different config "
            f"(config_sha256 {existing.config_sha256[:12]}…, this run {cfg.sha256()[:12]}…): "
            f"{describe_change(existing.config, cfg.fingerprint(), tokenizer_changed)}; "
            "choose another --output or remove it first"
        )
    return existing


def items_done(items, staging: str) -> tuple[int, int]:
    """(work items whose cache file is in staging, all work items): what a rerun reuses."""
    from pipeline.beam import itemcache

    fs, path = _fs(f"{staging}/items")
    fs.invalidate_cache(path)  # the workers wrote there from other processes
    try:
        names = {n.rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(path, detail=False)}
    except FileNotFoundError:
        names = set()
    expected = [itemcache.cache_url("", item).rsplit("/", 1)[-1] for item in items]
    return sum(name in names for name in expected), len(expected)


def without_validation(records, languages: dict[str, Language], fraction: float) -> dict[str, int]:
    """{lang: kept pages} of the languages with kept pages but none held out for validation
    (a language of fewer than MIN_PAGES_FOR_VALIDATION pages gets only its share, usually none);
    {} when the config asked for no validation split."""
    if fraction <= 0:
        return {}
    held = {stat.lang: stat.value for stat in read_stats(records) if stat.kind == "validation_pages"}
    return {lang: c.kept for lang, c in languages.items() if c.kept and not held.get(lang)}


def missing_root(output: str) -> str | None:
    """The outermost folder of `output` (itself included) that does not exist yet, or None."""
    fs, path = _fs(output)
    top = None
    while path and not fs.exists(path):
        top, parent = path, path.rsplit("/", 1)[0]
        if parent == path:
            break
        path = parent
    return top


def remove_empty(output: str, up_to: str) -> None:
    """Remove `output` and its parents up to `up_to` (a `missing_root`) while they are empty:
    a run that produced nothing leaves no folder behind. Object stores have no empty folders."""
    fs, path = _fs(output)
    while path.startswith(up_to):
        try:
            if fs.ls(path, detail=False):
                return
            fs.rmdir(path)
        except (OSError, NotImplementedError):
            return
        path = path.rsplit("/", 1)[0]


def stagings(output: str) -> list[str]:
    """Paths of every staging folder in `output`, of any config."""
    fs, root = _fs(output)
    # A listing of the root cached before the job knows no staging the workers created since.
    fs.invalidate_cache(root)
    if not fs.isdir(root):
        return []
    return sorted(n.rstrip("/") for n in fs.ls(root, detail=False)
                  if n.rstrip("/").rsplit("/", 1)[-1].startswith(schema.STAGING_PREFIX))


def remove_staging(output: str, only: str | None = None) -> list[str]:
    """Remove the staging folders of `output` (all configs', or just `only`); returns them."""
    fs, _ = _fs(output)
    gone = [s for s in stagings(output) if only is None or s == _fs(only)[1]]
    for path in gone:
        fs.rm(path, recursive=True)
    return gone


def staging_url(cfg: PreprocessConfig) -> str:
    return f"{cfg.output.rstrip('/')}/{schema.STAGING_PREFIX}{cfg.sha256()[:16]}"


def read_staged_json(fs, stage: str, name: str):
    """A JSON file the job wrote to staging, read by its exact name (one GET: no listing)."""
    path = f"{stage}/{name}"
    try:
        return json.loads(fs.cat_file(path))
    except FileNotFoundError:
        raise _publish_error(fs, path, "is missing") from None


def _publish_error(fs, path: str, problem: str) -> PublishError:
    return PublishError(
        f"{fs.unstrip_protocol(path)}, which the job wrote, {problem}: nothing was published (no "
        f"{schema.MANIFEST}). Run the same command again: it reuses the work items already read "
        "and redoes the rest. If it fails again, check that nothing else writes to or cleans up this output.")


def read_stats(records) -> list:
    """The rows of the staged stats.json as pipeline.beam.elements.Stat records, read by name from here on."""
    from pipeline.beam.elements import Stat  # with Beam, which the job that wrote them has loaded already

    return [Stat.from_row(row) for row in records]


def languages_from_stats(records) -> dict[str, Language]:
    """Each language's manifest entry from the staged stats.json rows (pipeline/beam/stats.py CollectStats)."""
    langs = {}

    def entry(lang):
        return langs.setdefault(
            lang, {k: 0 for k in schema.LANGUAGE_KEYS if k != "sampling_weight"} | {"sampling_weight": 1.0}
            | {"dropped": dict.fromkeys(schema.CONSTRUCT_DROPS, 0)}
        )

    for stat in read_stats(records):  # "validation_pages" rows are without_validation's
        if stat.kind == "outcome":
            entry(stat.lang)[stat.outcome] += stat.value
            entry(stat.lang)["pages_read"] += stat.value
        elif stat.kind == "replaced":
            entry(stat.lang)["replaced_characters"] += stat.value
        elif stat.kind == "dropped":
            for reason, n in zip(schema.CONSTRUCT_DROPS, stat.value):
                entry(stat.lang)["dropped"][reason] += n
        elif stat.kind == "examples":
            entry(stat.lang)["examples"] += stat.value
        elif stat.kind == "weight":
            entry(stat.lang)["sampling_weight"] = round(float(stat.value), 6)
        elif stat.kind in ("text", "masks"):  # pipeline/beam/stats.py's summaries
            entry(stat.lang)[stat.kind] = stat.value
    return {lang: Language(**c) for lang, c in sorted(langs.items())}


# A reject's reason without the values it quotes or counts: "parse error: non-integer id 'a'" and
# "... id 'b'" are one reason.
_REASON_VALUES = re.compile(r"'[^']*'|\"[^\"]*\"|\b\d+\b")
_REASONS_SHOWN = 3


def _reasons(fs, stage: str, rejects: list[str]) -> list[tuple[str, int]]:
    """The commonest reasons in the staged rejects files, with their counts."""
    counts = collections.Counter()
    for rel in rejects:
        with fs.open(f"{stage}/{rel}", "rt", encoding="utf-8") as f:
            for line in f:
                counts[_REASON_VALUES.sub("…", json.loads(line)["reason"])] += 1
    return counts.most_common(_REASONS_SHOWN)


def nothing_kept(cfg: PreprocessConfig, languages: dict[str, Language], reasons) -> str:
    """NothingKept's message: the inputs, the pages read and what became of them, what to do."""
    shown = [redact(u) for u in cfg.inputs[:3]] + ([f"and {len(cfg.inputs) - 3} more"] if len(cfg.inputs) > 3 else [])
    names, read = ", ".join(shown), sum(c.pages_read for c in languages.values())
    kept = sum(c.kept for c in languages.values())
    head = f"{names}: no training example, so nothing was published"
    if not read:
        return (f"{head}: no page was read; check that the input holds pages (MediaWiki <page> elements, "
                "or JSONL / Parquet rows)")
    if kept:
        from contract import holdout

        pages = {lang: c.kept for lang, c in languages.items() if c.kept}
        return (f"{head}: all {kept} kept pages went to the validation split (--validation-fraction "
                f"{cfg.validation_fraction:g}); {holdout.hint(pages)}, or 0 holds out none")
    outcomes = ", ".join(f"{n} {o}" for o in schema.PAGE_OUTCOMES
                         if (n := sum(getattr(c, o) for c in languages.values())))
    commonest = ", ".join(f'"{reason}" {n}' for reason, n in reasons)
    return (f"{head}: none of the {read} pages read was kept ({outcomes}"
            + (f"; commonest reasons: {commonest}" if commonest else "") + "); check that the input is articles "
            "in a format canine preprocess reads: MediaWiki XML, or JSONL / Parquet rows with an integer id and a text")


def trial_slice(max_pages: int | None) -> str | None:
    """The manifest's words for a --max-pages output (None for a whole run): what `canine inspect`
    and the run's last line show, so that a trial is never taken for the whole dump."""
    if max_pages is None:
        return None
    pages = f"{max_pages} page{'s' * (max_pages != 1)}"
    return f"the first {pages} of each input file (--max-pages {max_pages}); not the whole dump"


def check_accounting(languages: dict[str, Language]) -> None:
    for lang, c in languages.items():
        if problem := c.accounting_error():
            raise RuntimeError(f"accounting broken for {lang}: {problem}")


def _publish(fs, src: str, dst: str, size: int | None = None) -> None:
    """Put one staged file in place and check it arrived whole: a rename on local disks; on
    object stores a server-side copy (staging is removed after the manifest). fsspec's `mv`
    there may try the store's newer move API first (gcsfs: GCS `moveTo`), which not every
    GCS-compatible server has, and retries it for minutes before falling back. `size`: what
    the job recorded writing, checked before the copy too."""
    try:
        staged = fs.info(src)["size"]
    except FileNotFoundError:
        raise _publish_error(fs, src, "is missing") from None
    if size is not None and staged != size:
        raise _publish_error(fs, src, f"has {staged} bytes where the job wrote {size}")
    if is_local(fs):
        fs.mv(src, dst)
    else:
        fs.cp_file(src, dst)
    if (placed := fs.info(dst)["size"]) != staged:
        raise _publish_error(fs, src, f"was copied to {fs.unstrip_protocol(dst)} as {placed} bytes, not {staged}")


def finalize(cfg: PreprocessConfig, staging: str, records=None) -> Manifest:
    """Publish what the job staged and write the manifest (module docstring); NothingKept, with
    nothing published, if it made no training example. `records`: stats.json, if read already."""
    fs, root = _fs(cfg.output)
    _, stage = _fs(staging)
    # Everything in staging was written by the job's workers: other processes, other machines.
    # This process's listing cache (fsspec's dircache, filled when run_job and the lock looked at
    # the output before the job) knows none of it, and gcsfs's info() trusts a cached listing of
    # an ancestor over the store: FileNotFoundError for every staged file, with 2 workers or
    # more (gcsfs/_dircache.py: "concurrent external mutations are reconciled only by
    # invalidate_cache"). From here on this process is the only writer, and its own writes keep
    # the cache right.
    fs.invalidate_cache()
    languages = languages_from_stats(read_staged_json(fs, stage, "stats.json") if records is None else records)
    check_accounting(languages)
    shard_records = read_staged_json(fs, stage, "shards.json")
    rejects = read_staged_json(fs, stage, "rejects.json")
    if not any(r["split"] == "train" and r["rows"] for r in shard_records):
        raise NothingKept(nothing_kept(cfg, languages, _reasons(fs, stage, rejects)))
    # Exactly the files the job recorded writing, by name: no listing of staging.
    published = [(r["path"], r["bytes"]) for r in shard_records] + [(schema.TOKENIZER, None)]
    published += [(rel, None) for rel in rejects]
    # Stale files from an earlier, unfinished run (there is no manifest, or we would not be here).
    for folder in (*schema.SPLITS, schema.REJECTS):
        if fs.exists(f"{root}/{folder}"):
            fs.rm(f"{root}/{folder}", recursive=True)
    for rel, size in published:
        if "/" in rel:  # local disks need the folder; object stores have none
            fs.makedirs(f"{root}/{rel.rsplit('/', 1)[0]}", exist_ok=True)
        _publish(fs, f"{stage}/{rel}", f"{root}/{rel}", size)
        faults.point("publish")
    splits = {}
    for split in schema.SPLITS:
        shards = tuple(Shard(r["path"], r["rows"], r["codepoints"], r["sha256"])
                       for r in shard_records if r["split"] == split)
        splits[split] = Split(sum(s.rows for s in shards), sum(s.codepoints for s in shards), shards)
    manifest = Manifest(
        schema_version=schema.SCHEMA_VERSION,
        config=cfg.fingerprint(),
        config_sha256=cfg.sha256(),
        splits=splits,
        languages=languages,
        tokenizer=FileRef(schema.TOKENIZER, file_sha256(f"{cfg.output.rstrip('/')}/{schema.TOKENIZER}")),
        rejects=tuple(rejects),
        trial_slice=trial_slice(cfg.max_pages),
        seq_len=cfg.seq_len,  # written as config["seq_len"]: Manifest checks the fingerprint has it there
    )
    write_manifest(cfg.output, manifest)
    faults.point("published")
    # This config's staging, and any other config's: with a manifest of this config in place,
    # no run of another config can use this output any more.
    for path in remove_staging(cfg.output):
        if path != stage:
            log.warning("removed %s, staging of another config's unfinished run", path)
    return manifest
