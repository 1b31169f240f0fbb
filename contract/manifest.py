"""`_manifest.json`, the output's table of contents: one typed record, its writer and its reader.

    m = read_manifest(directory)       # checked: schema_version, every field and its type
    m.splits["train"].shards[0].sha256, m.languages["en"].kept, m.seq_len
    m, sha = open_manifest(directory)  # and the sha256 of the file's bytes (the model card names it)
    write_manifest(directory, m)       # atomically, last of all the output's files

The pipeline writes it (pipeline/output/output.py), the synthetic shards too (pipeline/synthetic.py);
`canine inspect`, `canine validate`, `canine report` and the trainer (training/train/data.py)
read it. It imports only the rest of the contract and fsspec. The JSON is part of the
output: `to_json` gives the bytes the pipeline has always written (keys sorted, indent 1,
UTF-8), so an output stays byte-identical.
"""

import dataclasses
import hashlib
import json
from dataclasses import dataclass

import fsspec

from contract import schema
from contract.files import atomic_write


class ManifestError(ValueError):
    """A manifest that breaks the schema; the message names the file and the field."""


# The key of the manifest's free-form config that holds the data's seq_len (Manifest.seq_len says
# why it is there): the pipeline writes PreprocessConfig.seq_len under this name (its fingerprint).
CONFIG_SEQ_LEN = "seq_len"


@dataclass(frozen=True)
class Shard:
    path: str  # relative to the output's root: train/part-00000-of-00004.parquet
    rows: int
    codepoints: int  # summed over its rows (CLS and SEPs included)
    sha256: str  # of the file's bytes: the trainer checks it on first read


@dataclass(frozen=True)
class Split:
    rows: int  # summed over its shards
    codepoints: int
    shards: tuple[Shard, ...]


@dataclass(frozen=True)
class Language:
    """One language's page accounting: pages_read = the sum of schema.PAGE_OUTCOMES."""

    pages_read: int
    redirects: int
    non_article: int
    parse_errors: int
    empty: int
    kept: int
    examples: int  # rows of this language over both splits
    sampling_weight: float  # share^alpha smoothing (PreprocessConfig.alpha), rounded to 6 places
    replaced_characters: int  # input characters that aliased a special codepoint
    dropped: dict[str, int]  # schema.CONSTRUCT_DROPS reason -> constructs removed from kept pages
    # Articles that are disambiguation pages (schema.PAGE_OUTCOMES). Outputs made before it existed
    # counted them as kept, and read as 0.
    disambiguation: int = 0
    # What the text and the masks look like, for a language nobody checked by hand
    # (pipeline/beam/stats.py writes them, `canine inspect` shows them). Outputs made before they
    # existed read as {}.
    text: dict = dataclasses.field(default_factory=dict)  # variant markup rendered; end-matter headings
    # dropped and the last headings kept, [[title, pages], ...]
    masks: dict = dataclasses.field(default_factory=dict)  # CANINE-C masked share per example (p10,
    # median, in %) and masked span lengths (median, p90, max)

    def accounting_error(self) -> str | None:
        """What breaks the identity pages_read = sum of the outcomes, or None."""
        parts = sum(getattr(self, k) for k in schema.PAGE_OUTCOMES)
        if self.pages_read == parts:
            return None
        return f"pages_read {self.pages_read} != {' + '.join(schema.PAGE_OUTCOMES)} = {parts}"


@dataclass(frozen=True)
class FileRef:
    path: str  # relative to the output's root
    sha256: str


@dataclass(frozen=True)
class Manifest:
    schema_version: int  # schema.SCHEMA_VERSION
    config: dict  # the pipeline config's fingerprint (PreprocessConfig.fingerprint(): JSON data)
    config_sha256: str  # config_sha256(config): the data's identity, checked by a resumed training run
    splits: dict[str, Split]  # schema.SPLITS
    languages: dict[str, Language]  # sorted by code
    tokenizer: FileRef  # the CANINE-S WordPiece vocabulary (schema.TOKENIZER)
    rejects: tuple[str, ...]  # rejects files (schema.REJECTS/<lang>.jsonl), relative paths
    # Set only on a trial slice (`canine preprocess --max-pages N`, config.max_pages), in words: "the
    # first N pages of each input file (--max-pages N); not the whole dump". Absent from the JSON of a
    # whole run, whose bytes stay what they were before the option existed.
    trial_slice: str | None = None
    # The example length the data was built for, in codepoints (CLS and SEPs included): the one
    # number the pipeline and the trainer must agree on. The JSON holds it where it always has,
    # as config["seq_len"] (CONFIG_SEQ_LEN): a key of its own would change every output's bytes,
    # and moving it out of the config would change config_sha256, the data's identity. This field
    # is the one reader of that key. A writer gives it (pipeline/output/output.py) and it must be the
    # config's; left out (None), it is read from the config. 0: the config does not say.
    seq_len: int | None = None

    def __post_init__(self):
        written = self.config.get(CONFIG_SEQ_LEN, 0)
        if not _non_negative_int(written):
            raise ValueError(f"Manifest: config[{CONFIG_SEQ_LEN!r}] {written!r} is not a non-negative integer")
        if self.seq_len is None:
            object.__setattr__(self, "seq_len", written)  # frozen: the dataclasses way to set a derived field
        elif self.seq_len != written:
            raise ValueError(f"Manifest: seq_len {self.seq_len!r}, but config[{CONFIG_SEQ_LEN!r}] is {written!r}: "
                             "the JSON keeps only the config's, so the two must be the same")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        del d["seq_len"]  # written as config["seq_len"] (the field's comment)
        if d["trial_slice"] is None:
            del d["trial_slice"]
        return d

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_dict(cls, raw, where: str = schema.MANIFEST) -> "Manifest":
        """Check `raw` (parsed JSON) against the schema; ManifestError names `where` and the field."""
        fields = _Fields(raw, where, "")
        version = fields.get("schema_version", int)
        if version != schema.SCHEMA_VERSION:
            raise ManifestError(f"{where}: schema_version {version!r}, this version reads {schema.SCHEMA_VERSION}")
        config = fields.child("config")  # free-form, but for the one key the contract names
        seq_len = config.get(CONFIG_SEQ_LEN, int) if CONFIG_SEQ_LEN in config.raw else 0
        m = cls(
            schema_version=version,
            config=config.raw,
            config_sha256=fields.get("config_sha256", str),
            splits=_splits(fields.child("splits")),
            languages={lang: _language(f) for lang, f in fields.children("languages")},
            tokenizer=_read(FileRef, fields.child("tokenizer")),
            rejects=tuple(fields.get("rejects", list)),
            trial_slice=fields.get("trial_slice", str) if "trial_slice" in raw else None,
            seq_len=seq_len,
        )
        if not all(isinstance(r, str) for r in m.rejects):
            raise ManifestError(f"{where}: rejects: not a list of paths")
        fields.no_others()
        return m


def config_sha256(config: dict) -> str:
    """The identity of a config fingerprint: sha256 of its compact, key-sorted JSON."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def manifest_url(directory: str) -> str:
    return f"{directory.rstrip('/')}/{schema.MANIFEST}"


def read_manifest(directory: str) -> Manifest:
    """The manifest of an output directory (any fsspec URL). FileNotFoundError if it has none,
    ManifestError if it breaks the schema."""
    return open_manifest(directory)[0]


def open_manifest(directory: str) -> tuple[Manifest, str]:
    """read_manifest's manifest and the sha256 of the file's bytes, from one read: what a model
    card names as the data it was trained on."""
    url = manifest_url(directory)
    try:
        with fsspec.open(url, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{url}: no manifest (not a complete output of `canine preprocess`)") from None
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ManifestError(f"{url}: not valid JSON ({e}): a damaged or partly copied manifest; copy the "
                            "output again, or rerun `canine preprocess` into a new --output") from None
    return Manifest.from_dict(raw, url), hashlib.sha256(data).hexdigest()


def write_manifest(directory: str, manifest: Manifest) -> None:
    """Readers see no manifest or a whole one (atomic_write)."""
    atomic_write(manifest_url(directory), manifest.to_json())


# --- reading, field by field -------------------------------------------------------------------
def _non_negative_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", dict: "an object", list: "a list"}


class _Fields:
    """One JSON object of the manifest, read field by field; errors say `where: path.field`."""

    def __init__(self, raw, where: str, path: str):
        if not isinstance(raw, dict):
            raise ManifestError(f"{where}: {path or 'the manifest'}: not an object")
        self.raw, self.where, self.path, self.seen = raw, where, path, set()

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, kind: type):
        self.seen.add(key)
        if key not in self.raw:
            raise ManifestError(f"{self.where}: {self._name(key)} is missing")
        value = self.raw[key]
        ok = isinstance(value, (int, float)) if kind is float else isinstance(value, kind)
        if not ok or isinstance(value, bool) or (kind is int and value < 0):
            wanted = "a non-negative integer" if kind is int else _TYPE_NAMES[kind]
            raise ManifestError(f"{self.where}: {self._name(key)}: {value!r} is not {wanted}")
        return value

    def child(self, key: str) -> "_Fields":
        return _Fields(self.get(key, dict), self.where, self._name(key))

    def children(self, key: str):
        """(name, _Fields) of each object in the object at `key`."""
        parent = self.child(key)
        return [(name, parent.child(name)) for name in parent.raw]

    def items(self, key: str) -> list["_Fields"]:
        """_Fields of each object in the list at `key`."""
        return [_Fields(x, self.where, f"{self._name(key)}[{i}]") for i, x in enumerate(self.get(key, list))]

    def no_others(self) -> None:
        extra = sorted(set(self.raw) - self.seen)
        if extra:
            raise ManifestError(f"{self.where}: {self._name(extra[0])}: not a field of schema {schema.SCHEMA_VERSION}")


def _read(cls, fields: _Fields, **nested):
    """An instance of the flat dataclass `cls` from its fields (`nested`: those read already). A
    field with a default value may be absent (an output made before it existed)."""
    kinds = {f.name: f.type for f in dataclasses.fields(cls) if f.default_factory is dataclasses.MISSING
             and (f.default is dataclasses.MISSING or f.name in fields.raw)}
    values = {name: fields.get(name, kind) for name, kind in kinds.items() if name not in nested}
    fields.no_others()
    return cls(**values, **nested)


def _splits(fields: _Fields) -> dict[str, Split]:
    out = {}
    for name in schema.SPLITS:
        # A missing split reads as an empty one, so the error names what a reader needs: its shards.
        fields.seen.add(name)
        split = _Fields(fields.raw.get(name, {}), fields.where, fields._name(name))
        out[name] = _read(Split, split, shards=tuple(_read(Shard, f) for f in split.items("shards")))
    fields.no_others()
    return out


def _language(fields: _Fields) -> Language:
    dropped = fields.child("dropped")
    counts = {reason: dropped.get(reason, int) for reason in dropped.raw}
    optional = {key: fields.get(key, dict) for key in ("text", "masks") if key in fields.raw}
    return _read(Language, fields, dropped=counts, **optional)

