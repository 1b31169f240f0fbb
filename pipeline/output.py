"""Running the job and publishing its output exactly once.

The Beam job writes only below `OUTPUT/.staging-<config sha>/`. After the pipeline succeeds,
`finalize` checks the accounting, moves the staged files into `train/`, `validation/`,
`rejects/` and `tokenizer.json`, and writes `manifest.json` last (temp file, then rename). No
manifest means no usable output; an output that has one is never touched again except by a
run of the very same config, which is a no-op (issue 2 "Exactly once", issue 5 "Scheduled").
"""

import dataclasses
import json
import logging
import time

import fsspec

from pipeline import contract, sources
from pipeline.config import PreprocessConfig

log = logging.getLogger(__name__)


class OutputExistsError(RuntimeError):
    """The output directory already holds a complete output made with another config."""


def _fs(url):
    fs, path = fsspec.core.url_to_fs(url)
    return fs, path.rstrip("/")


def read_manifest(output: str) -> dict | None:
    fs, root = _fs(output)
    path = f"{root}/{contract.MANIFEST}"
    if not fs.exists(path):
        return None
    with fs.open(path, "r", encoding="utf-8") as f:
        return json.load(f)


def fingerprint_inputs(items) -> tuple:
    """(url, size, version) per input file: a changed dump gives a different config sha."""
    out = []
    for path in sorted({i.path for i in items}):
        fs, p = fsspec.core.url_to_fs(path)
        info = fs.info(p)
        version = info.get("ETag") or info.get("etag") or info.get("mtime") or info.get("LastModified") or ""
        out.append((path, int(info.get("size") or 0), str(version)))
    return tuple(out)


def beam_options(workers: int, runner: str, extra_args=()):
    from apache_beam.options.pipeline_options import PipelineOptions

    args = [f"--runner={runner}", *extra_args]
    if runner == "DirectRunner":
        # Name the runner and the mode: recent Beam may otherwise pick Prism, which downloads a binary.
        mode = "multi_processing" if workers > 1 else "in_memory"
        args += [f"--direct_num_workers={workers}", f"--direct_running_mode={mode}"]
    return PipelineOptions(args)


def prepare(cfg: PreprocessConfig):
    """Everything that can fail before work starts: config, input paths, tokenizer, output state.
    Returns (resolved cfg, work items, tokenizer json or None, existing manifest or None)."""
    cfg.validate()
    items = sources.plan_work_items(list(cfg.inputs), cfg.lang, cfg.streams_per_item)
    cfg = dataclasses.replace(cfg, inputs=tuple(cfg.inputs), input_fingerprints=fingerprint_inputs(items))
    tokenizer_json = None
    if cfg.tokenizer:
        try:
            with fsspec.open(cfg.tokenizer, "r", encoding="utf-8") as f:
                tokenizer_json = f.read()
        except FileNotFoundError:
            raise sources.InputError(f"--tokenizer {cfg.tokenizer}: no such file") from None
    existing = read_manifest(cfg.output)
    if existing is not None and existing.get("config_sha256") != cfg.sha256():
        raise OutputExistsError(
            f"{cfg.output} already holds a complete output made with a different config "
            f"(config_sha256 {existing.get('config_sha256', '?')[:12]}…, this run {cfg.sha256()[:12]}…); "
            "choose another --output or remove it first"
        )
    return cfg, items, tokenizer_json, existing


def run(cfg: PreprocessConfig, workers: int = 1, runner: str = "DirectRunner", beam_args=(), before_publish=None) -> dict:
    """Run the whole job and return the manifest (the existing one if the output is up to date).
    `before_publish()` runs after the pipeline, before anything is moved into place: a lock
    holder's check that it still owns the output."""
    import apache_beam as beam

    from pipeline import job

    started = time.time()
    cfg, items, tokenizer_json, existing = prepare(cfg)
    if existing is not None:
        log.info("%s is up to date (config %s): nothing to do", cfg.output, cfg.sha256()[:12])
        return {**existing, "up_to_date": True}
    staging = staging_url(cfg)
    fs, staging_path = _fs(staging)
    # A killed run of this same config left staging behind: keep its finished work items
    # (items/), drop everything else, which is recomputed from them.
    for name in fs.ls(staging_path, detail=False) if fs.exists(staging_path) else []:
        if name.rstrip("/").rsplit("/", 1)[-1] != "items":
            fs.rm(name, recursive=True)
    fs.makedirs(staging_path, exist_ok=True)
    log.info("%d work items from %d input files", len(items), len(cfg.input_fingerprints))
    p = beam.Pipeline(options=beam_options(workers, runner, beam_args))
    job.build(p, cfg, items, staging, tokenizer_json)
    result = p.run()
    result.wait_until_finish()
    counters = _counters(result)
    if before_publish is not None:
        before_publish()
    manifest = finalize(cfg, staging)
    # Not in manifest.json (which must not depend on how the run went): returned and printed.
    manifest["run"] = {
        "elapsed_s": round(time.time() - started, 2),
        "work_items": len(items),
        "items_parsed": counters.get("items_parsed", 0),
        "items_reused": counters.get("items_reused", 0),
    }
    return manifest


def _counters(result) -> dict:
    out = {}
    for c in result.metrics().query().get("counters", []):
        value = c.committed if c.committed is not None else c.attempted
        out[c.key.metric.name] = out.get(c.key.metric.name, 0) + (value or 0)
    return out


def staging_url(cfg: PreprocessConfig) -> str:
    return f"{cfg.output.rstrip('/')}/.staging-{cfg.sha256()[:16]}"


def _read_json(fs, path):
    with fs.open(path, "r", encoding="utf-8") as f:
        return json.load(f)


def languages_from_stats(records) -> dict:
    langs = {}

    def entry(lang):
        return langs.setdefault(
            lang, {k: 0 for k in contract.LANGUAGE_KEYS if k != "sampling_weight"} | {"sampling_weight": 1.0}
        )

    for rec in records:
        kind, lang = rec[0], rec[1]
        if kind == "outcome":
            entry(lang)[rec[2]] += rec[3]
            entry(lang)["pages_read"] += rec[3]
        elif kind == "replaced":
            entry(lang)["replaced_characters"] += rec[2]
        elif kind == "examples":
            entry(lang)["examples"] += rec[2]
        elif kind == "weight":
            entry(lang)["sampling_weight"] = round(float(rec[2]), 6)
    return dict(sorted(langs.items()))


def check_accounting(languages: dict) -> None:
    for lang, c in languages.items():
        parts = sum(c[k] for k in contract.PAGE_OUTCOMES)
        if c["pages_read"] != parts:
            raise RuntimeError(f"accounting broken for {lang}: pages_read {c['pages_read']} != outcomes {parts}")


def finalize(cfg: PreprocessConfig, staging: str) -> dict:
    fs, root = _fs(cfg.output)
    _, stage = _fs(staging)
    languages = languages_from_stats(_read_json(fs, f"{stage}/stats.json"))
    check_accounting(languages)
    shard_records = _read_json(fs, f"{stage}/shards.json") if fs.exists(f"{stage}/shards.json") else []
    # Stale files from an earlier, unfinished run (there is no manifest, or we would not be here).
    for folder in (*contract.SPLITS, contract.REJECTS):
        if fs.exists(f"{root}/{folder}"):
            fs.rm(f"{root}/{folder}", recursive=True)
    for name in fs.find(stage):
        rel = name[len(stage) + 1 :]
        if rel in ("stats.json", "shards.json"):
            continue
        if "/" in rel:
            fs.makedirs(f"{root}/{rel.rsplit('/', 1)[0]}", exist_ok=True)
        fs.mv(name, f"{root}/{rel}")
    splits = {}
    for split in contract.SPLITS:
        recs = [r for r in shard_records if r["split"] == split]
        splits[split] = {
            "rows": sum(r["rows"] for r in recs),
            "codepoints": sum(r["codepoints"] for r in recs),
            "shards": [{k: r[k] for k in ("path", "rows", "codepoints", "sha256")} for r in recs],
        }
    rejects_dir = f"{root}/{contract.REJECTS}"
    rejects = sorted(n[len(root) + 1 :] for n in fs.find(rejects_dir)) if fs.exists(rejects_dir) else []
    from pipeline.shards import sha256_of  # local: keeps this module light for `canine inspect`

    manifest = {
        "schema_version": contract.SCHEMA_VERSION,
        "config": cfg.fingerprint(),
        "config_sha256": cfg.sha256(),
        "splits": splits,
        "languages": languages,
        "tokenizer": {"path": contract.TOKENIZER, "sha256": sha256_of(f"{cfg.output.rstrip('/')}/{contract.TOKENIZER}")},
        "rejects": rejects,
    }
    write_manifest(cfg.output, manifest)
    fs.rm(stage, recursive=True)
    return manifest


def write_manifest(output: str, manifest: dict) -> None:
    """Temp file then rename: readers see no manifest or a whole one."""
    fs, root = _fs(output)
    tmp = f"{root}/.{contract.MANIFEST}.tmp"
    with fs.open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, sort_keys=True, ensure_ascii=False)
    fs.mv(tmp, f"{root}/{contract.MANIFEST}")
