"""The preprocessing job's configuration: everything that decides the bytes of the output.

`PreprocessConfig.fingerprint()` is what `_manifest.json` records as `config` / `config_sha256`.
How the job runs (worker count, runner, Beam options) is deliberately not in it: the output
must not depend on those.
"""

import dataclasses

from contract import schema
from contract.files import redact
from contract.manifest import config_sha256
from contract import options
from contract.options import option
from pipeline.rows.masks import CHAR_SPAN_MAX, CHAR_SPAN_RULES
from pipeline.wikitext.convert import check_convert, require
from pipeline.wikitext.variants import check_variants


@dataclasses.dataclass(frozen=True)
class PreprocessConfig:
    inputs: tuple = option((), "fsspec URLs or globs: MediaWiki XML exports (.xml/.bz2/.gz, schema 0.3-0.11; "
                           "a multistream dump with its -index file), or rows as JSONL or Parquet: an integer `id`, "
                           "`text` (plain text), optional `title` and `lang`")
    output: str = option("", "output directory (fsspec URL); not part of the fingerprint", internal=True)
    seq_len: int = option(schema.DEFAULT_SEQ_LEN, "codepoints per example, CLS and SEPs included (paper: 2048)")
    seed: int = option(0, "root of every mask, sentence-order and sampling decision")
    vocab_size: int = option(32000, "WordPiece vocabulary to train for CANINE-S (when no --tokenizer is given)")
    tokenizer: str | None = option(None, "an existing tokenizer.json (HF tokenizers format) instead of training one "
                                   "(default: train one)")
    # The pages with the smallest id hashes: a fixed sample in bounded memory.
    tokenizer_pages: int = option(50_000, "pages the WordPiece vocabulary is trained on")
    # mBERT's 0.7 (docs/canine.md "Recipe").
    alpha: float = option(0.7, "language smoothing exponent: p_lang ~ share^alpha")
    validation_fraction: float = option(0.005, "share of each language's pages held out for validation, those with "
                                        "the smallest hashes of the page id (at least one page for a language of "
                                        "20 kept pages or more)")
    lang: str | None = option(None, "language of inputs that name none: no xml:lang, no lang column "
                              "(default: each input's own)")
    # ALBERT's SOP; off: [CLS] A [SEP].
    sentence_order: bool = option(False, "[CLS] A [SEP] B [SEP] pairs with a 50% swap and SOP labels")
    # Shards per split = ceil(split codepoints / shard_codepoints): sized by data, not by workers, and
    # a row's shard is a hash of its example_id. 32M codepoints is ~128 MB of int32 before zstd.
    shard_codepoints: int = option(32_000_000, "codepoints per output shard (the shard count follows from it)")
    # Big enough that the one part-filled example a group leaves is negligible, small enough for one worker.
    pack_group_codepoints: int = option(16_000_000, "codepoints of pages packed together in one group "
                                        "(per language and split)")
    streams_per_item: int = option(10, "bz2 streams of a multistream dump per work item (about 100 pages a stream)")
    # A trial slice (pipeline/sources/plan.py reads only what it needs): per input file, so that every
    # language of a multi-dump run gets its pages. In the fingerprint only when set, so a full run's
    # config_sha256 is what it was before the option existed, and a trial's differs from it.
    max_pages: int | None = option(None, "a trial slice: only the first this many pages of each input file, in "
                                   "file order (every <page> counts, any namespace; JSONL / Parquet: rows), "
                                   "reading no more of the file than they need; the manifest and canine inspect "
                                   "say so (default: every page)")
    # Cleaning (pipeline/wikitext/clean.py): tables and end-matter sections are dropped by default,
    # as in mBERT's WikiExtractor text: table cells are fragments, end matter is citations and lists of titles.
    keep_tables: bool = option(False, "keep table cells' text, a row a line, cells joined by ' | ' (default: drop tables)")
    keep_end_matter: bool = option(False, "keep References, See also, External links, ... sections "
                                   "(pipeline/wikitext/endmatter.py; default: drop them)")
    # Disambiguation pages ("X may refer to:" and links) are no prose; mBERT's WikiExtractor text kept
    # them, the default drops them as an outcome of their own. In the fingerprint always, as the two
    # above: the default's output differs from a run before the option existed (it kept them), so its
    # config_sha256 must too, or that older output would read as this config's, complete.
    keep_disambiguation: bool = option(False, "keep disambiguation pages ('X may refer to:' lists, told by "
                                       "__DISAMBIG__ and each wiki's disambiguation templates: "
                                       "pipeline/wikitext/disambiguation.py; default: drop and count them)")
    # Language-variant markup `-{...}-` (pipeline/wikitext/variants.py): by default each wiki's own
    # no-conversion view (zh: the text as written, a rule's zh-hans text first); the text around the markup
    # is never converted to the variant's script.
    variants: tuple = option((), "language variants to render `-{...}-` markup in, as lang=variant items, e.g. "
                             "zh=zh-hans,sr=sr-el (default: each wiki's own view: zh, sr, ..., sh-latn)")
    # The whole text in one script, as a reader who picked the variant sees it (pipeline/wikitext/convert.py);
    # off by default: conversion is lossy (發/髮 -> 发). In the fingerprint only when set, so that other
    # runs' config_sha256 is what it was before the option existed.
    convert: tuple = option((), "convert the whole text of a language's pages to one variant, as lang=variant items, "
                            "e.g. zh=zh-hans (simplified), zh=zh-hant, sr=sr-el; its `-{...}-` markup renders in "
                            "that variant (default: each page's text as written; docs/text.md)")
    # CANINE-C spans (pipeline/rows/masks.py, MaskPlanConfig.of(config)): the paper's whitespace runs are a
    # clause or a paragraph in Chinese, Japanese or Thai; docs/canine.md, "Spans in scripts written
    # without spaces", has the measured masked shares.
    char_spans: str = option(CHAR_SPAN_RULES[0], "CANINE-C spans: 'bounded' cuts text of scripts written without "
                             "spaces (Han, kana, Thai, ...) into spans of at most --char-span-max characters; "
                             "'whitespace' keeps the paper's whitespace-delimited runs", choices=CHAR_SPAN_RULES)
    char_span_max: int = option(CHAR_SPAN_MAX, "longest CANINE-C span of an unspaced script, in characters "
                                "(a character with its combining marks) (with --char-spans bounded)")
    input_fingerprints: tuple = option((), "((url, size, content id), ...) filled in by output.prepare",
                                       internal=True)

    def fingerprint(self) -> dict:
        """The part of the config that determines the output, as JSON-ready data."""
        d = dataclasses.asdict(self)
        d.pop("output")
        # URLs as recorded in the manifest: credentials masked (a presigned URL's signature
        # changes on every signing; the content id says whether the bytes did).
        d["input_fingerprints"] = [[redact(x[0]), *x[1:]] for x in self.input_fingerprints]
        d["inputs"] = [redact(u) for u in self.inputs]
        d["tokenizer"] = self.tokenizer and redact(self.tokenizer)
        d["variants"] = list(self.variants)  # as JSON reads it back
        if self.convert:  # in the fingerprint only when set (the field's comment)
            d["convert"] = list(self.convert)
        else:
            d.pop("convert")
        if self.max_pages is None:  # a full run: the fingerprint outputs made before the option have
            d.pop("max_pages")
        d["schema_version"] = schema.SCHEMA_VERSION
        return d

    def sha256(self) -> str:
        """The data's identity (manifest.config_sha256 of the fingerprint)."""
        return config_sha256(self.fingerprint())

    def validate(self) -> None:
        """Reject settings that cannot produce a valid output, before any work starts."""
        problems = []
        if not self.inputs:
            problems.append("no INPUT given")
        if not self.output:
            problems.append("--output is required")
        if self.seq_len < 16:
            problems.append(f"--seq-len {self.seq_len} is too short (at least 16)")
        if not 0.0 <= self.validation_fraction < 1.0:
            problems.append(f"--validation-fraction {self.validation_fraction} must be in [0, 1)")
        if not 0.0 < self.alpha <= 1.0:
            problems.append(f"--alpha {self.alpha} must be in (0, 1]")
        if self.tokenizer is None and self.vocab_size < 100:
            problems.append(f"--vocab-size {self.vocab_size} is too small (at least 100)")
        problems += options.check_choices(self)  # every field with choices (char_spans), from its option()
        for name in ("shard_codepoints", "pack_group_codepoints", "streams_per_item", "tokenizer_pages",
                     "char_span_max"):
            if getattr(self, name) < 1:
                problems.append(f"--{name.replace('_', '-')} must be at least 1")
        if problem := max_pages_problem(self.max_pages):
            problems.append(problem)
        try:
            check_variants(self.variants)
        except ValueError as err:
            problems.append(f"--variant: {err}")
        if problem := convert_problem(self.convert, self.variants):
            problems.append(problem)
        if problems:
            raise ValueError("invalid preprocessing config: " + "; ".join(problems))


def max_pages_problem(value: int | None) -> str | None:
    """What is wrong with a --max-pages value, None if nothing: checked when the arguments are read
    (jobs/preprocess.py) and by validate."""
    if value is not None and value < 1:
        return f"--max-pages {value}: must be at least 1 (pages read from the start of each input)"
    return None


def convert_problem(convert: tuple, variants: tuple) -> str | None:
    """What is wrong with --convert, None if nothing: an item not offered, the package it needs
    missing, or a --variant of the same language that disagrees (a converted page's markup renders
    in its variant, as the reader's view does)."""
    try:
        chosen = check_convert(convert)
        require(chosen)
    except ValueError as err:
        return str(err) if str(err).startswith("--convert") else f"--convert: {err}"
    try:
        views = check_variants(variants)
    except ValueError:
        return None  # a --variant the user typed wrong: validate names it under --variant, once
    clash = [f"{lang}={views[lang]}" for lang in chosen if views.get(lang, chosen[lang]) != chosen[lang]]
    if clash:
        return (f"--convert {', '.join(f'{lang}={chosen[lang]}' for lang in chosen)}: --variant {', '.join(clash)} "
                "disagrees (a converted page's markup renders in the variant it is converted to); drop that --variant")
    return None
