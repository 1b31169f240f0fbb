"""MasakhaNER 1.0 test F1 per language: a random initialisation against a CANINE pretrained here, one budget.

    git clone --depth 1 https://github.com/masakhane-io/masakhane-ner /data/masakhane-ner
    python benchmarks/downstream_ner.py --data /data/masakhane-ner/data             # swa hau yor, ~25 min on 2 cores
    python benchmarks/downstream_ner.py --data D --pretrained runs/tiny              # skip the pretraining
    python benchmarks/downstream_ner.py --data D --init /models/canine-c --langs swa hau yor ibo pcm

The data is real text nobody here wrote: MasakhaNER 1.0 (Adelani et al., TACL 2021), news sentences
of ten African languages tagged PER / ORG / LOC / DATE, CoNLL files data/<lang>/{train,dev,test}.txt
of the masakhane-io/masakhane-ner repository; --data is that data folder. Its licence is CC BY-NC
4.0: fetch it to a local folder outside this repository and never commit it (the benchmark refuses
a --data or --work inside the repository, as the runs' prediction files hold the sentences).

Every row is fine-tuned with ONE budget (printed: steps, batch, lr, max_length, evaluations; the
kept weights are those of the best dev F1, their test F1 is the row's), one model per language as
the paper's per-language table, through `canine finetune ner --json` as a user runs it:
  (a) random initialisation: `--size` of (b)'s shape, no --init;
  (b) a CANINE-C pretrained by this project on the real Wikipedia pages of tests/data/wiki (14
      languages, none of them African; `canine preprocess` at --pretrain-seq-len, then `canine
      pretrain --config SIZE` for --pretrain-steps), or the run given as --pretrained;
  (c) with --init, any model `canine finetune --init` takes (a canine run or export, a Hugging
      Face CANINE directory such as google/canine-c downloaded beforehand).
Beside them: the CANINE paper's figures for CANINE-C and mBERT on the same languages (Clark et al.,
"CANINE: Pre-training an Efficient Tokenization-Free Encoder for Language Representation", TACL
2022, arXiv 2103.06874: Table 8, the language-wise breakdown of Table 5's NER scores). They are
CANINE-base (132M parameters, 124k steps at batch 4096 on mBERT's 104-language Wikipedia) fine-
tuned to convergence: a ceiling, not a like-for-like comparison; (a) against (b) is what this
measures. The tiny model has 0.45M parameters (0.19M besides its hash and position tables), small 10.3M.

Runs go under --work (default /tmp/canine-downstream): shards/, pretrain-SIZE-STEPS/, ner/ROW-LANG/
and logs/; a finished run is not run again (canine's own resume), and its wall time is then marked
"reused". Printed: the machine, the command, the budget, the pretraining (steps, data, its held-out
loss), each run as it ends (wall time, best step, dev and test figures), then the table.

Measured, `python benchmarks/downstream_ner.py --data /tmp/masakhaner/data` (the defaults; 2-core AMD EPYC
shared with other jobs, load average 3-23 during the run, 2026-12-02; 1228 s in all):
  preprocess 14 s: 54 pages kept, 14 languages, 1,486 train examples of 512 codepoints (737,181 codepoints)
  pretraining: tiny, 600 steps x 16 x 512 codepoints, 1 worker, 482 s; loss 7.66 -> 3.60; held out (en, the
  only language with validation pages): masked-character accuracy 0.140 against a unigram guess's 0.123
  test F1 x 100               swa    hau    yor   mean
  (a) random init (tiny)     36.1   35.4   27.2   32.9
  (b) pretrained here        28.9   31.0   22.5   27.5
  paper CANINE-C             72.7   76.1   67.9   72.2
  paper mBERT                87.1   89.3   78.7   85.0
  fine-tuning runs 114-130 s each (about 45 s of it Ray's start, DeepSpeed and the export), 100-115 windows/s.
At lr 1e-3 instead (swa): (a) 35.6, (b) 24.2. So at this budget the pretrained encoder, barely past a unigram
guess and trained on no African language, is a worse start than a random one, at either rate; (b) needs far
more pretraining (or --pretrained with a longer run) before this table can show what pretraining buys.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIKI = ROOT / "tests" / "data" / "wiki"

# Clark et al. 2022 (TACL; arXiv 2103.06874), Table 8: MasakhaNER test F1 per language, labeled
# (entity-level) F1. Read from two stored text copies of the paper (an HTML table and a markdown
# rendering, which agree). Macro averages over the ten (Table 5): mBERT 72.4, CANINE-C 65.5,
# CANINE-C + n-grams 76.8.
PAPER = {
    #        mBERT  CANINE-C  CANINE-C + n-grams
    "amh": (0.0, 44.6, 50.0),  # mBERT has no Amharic-script vocabulary
    "hau": (89.3, 76.1, 88.0),
    "ibo": (84.6, 75.6, 85.0),
    "kin": (73.9, 58.3, 72.8),
    "lug": (80.2, 69.4, 79.6),
    "luo": (75.8, 63.4, 74.2),
    "pcm": (89.8, 66.6, 88.7),
    "swa": (87.1, 72.7, 83.7),
    "wol": (64.9, 60.7, 66.5),
    "yor": (78.7, 67.9, 79.1),
}
PAPER_SOURCE = "Clark et al. 2022, CANINE (TACL; arXiv 2103.06874) Table 8"


def machine() -> str:
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30).stdout
        model = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "")
    except (OSError, subprocess.SubprocessError):
        pass
    return f"{model or 'unknown CPU'}, {os.cpu_count()} logical CPUs"


def _inside(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


class Canine:
    """`canine ARGS` as subprocesses from the work folder; each run's stderr kept in work/logs/NAME.log."""

    def __init__(self, work: Path):
        self.work, self.logs = work, work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # a local cluster of its own
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
        env.setdefault("DS_ACCELERATOR", "cuda" if shutil.which("nvidia-smi") else "cpu")  # the Makefile's
        env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self.env = env

    def __call__(self, name: str, args: list, timeout: float = 4 * 3600) -> tuple[subprocess.CompletedProcess, float]:
        start = time.perf_counter()
        with open(self.logs / f"{name}.log", "w", encoding="utf-8") as log:
            done = subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=self.work, env=self.env,
                                  stdout=subprocess.PIPE, stderr=log, text=True, timeout=timeout)
        return done, time.perf_counter() - start

    def failure(self, name: str, done: subprocess.CompletedProcess) -> str:
        lines = (self.logs / f"{name}.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()
        return f"exit {done.returncode}: {lines[-1] if lines else '(no output)'} (log: {self.logs / name}.log)"


def reused(canine: Canine, name: str, done: subprocess.CompletedProcess) -> bool:
    """The run was finished already: canine said 'nothing to do' (preprocess on stdout, the others on stderr)."""
    log = (canine.logs / f"{name}.log").read_text(encoding="utf-8", errors="replace")
    return "nothing to do" in log or "nothing to do" in (done.stdout or "")


def pretrain(canine: Canine, args) -> tuple[str, str]:
    """(b)'s encoder: (the run folder, a line saying what it is)."""
    if args.pretrained:
        return str(Path(args.pretrained).resolve()), f"(b) given: --pretrained {args.pretrained}"
    done, wall = canine("preprocess", ["preprocess", str(WIKI / "*.xml.bz2"), "--output", "shards", "--seq-len",
                                       args.pretrain_seq_len, "--workers", 1])
    if done.returncode:
        raise SystemExit(f"canine preprocess failed, {canine.failure('preprocess', done)}")
    inspect, _ = canine("inspect", ["inspect", "shards", "--json"])
    manifest = json.loads(inspect.stdout)
    langs = manifest["languages"]
    kept = sum(v["kept"] for v in langs.values())
    train, held = (manifest["splits"].get(split) or {} for split in ("train", "validation"))
    data = (f"{kept} real Wikipedia pages of {len(langs)} languages ({' '.join(sorted(langs))}) from tests/data/wiki: "
            f"{train.get('rows')} train examples of <= {args.pretrain_seq_len} codepoints ({train.get('codepoints')} "
            f"codepoints), {held.get('rows')} held out")
    print(f"preprocess: {data}; {wall:.0f} s{' (reused)' if reused(canine, 'preprocess', done) else ''}", flush=True)
    name = f"pretrain-{args.size}-{args.pretrain_steps}"
    print(f"pretraining {name}: canine pretrain --config {args.size}, {args.pretrain_steps} steps of "
          f"{args.pretrain_batch} x {args.pretrain_seq_len} codepoints, {args.workers} worker(s) ...", flush=True)
    done, wall = canine(name, ["pretrain", "--config", args.size, "--data", "shards", "--output", name, "--workers",
                               args.workers, "--max-steps", args.pretrain_steps, "--global-batch", args.pretrain_batch,
                               "--micro-batch", args.pretrain_batch // args.workers, "--seed", args.seed,
                               "--checkpoint-every", args.pretrain_steps, "--set", "train.eval_every=0"])
    if done.returncode:
        raise SystemExit(f"canine pretrain failed, {canine.failure(name, done)}")
    summary = json.loads((canine.work / name / "summary.json").read_text())
    line = (f"(b) pretrained here: {args.size}, {args.pretrain_steps} steps x {args.pretrain_batch} x "
            f"{args.pretrain_seq_len} codepoints on {data}; loss {summary.get('first_loss')} -> "
            f"{summary.get('final_loss')}, held-out loss {summary.get('eval_loss')} / masked-character accuracy "
            f"{summary.get('eval_accuracy')}; {summary.get('chars_per_s')} chars/s; wall {wall:.0f} s"
            + (" (reused)" if reused(canine, name, done) else ""))
    print(line, flush=True)
    return str(canine.work / name), line


def held_out(canine: Canine, run: str) -> None:
    """`canine evaluate RUN`: how far the pretrained encoder got beyond a unigram guess of masked characters."""
    done, _ = canine("evaluate", ["evaluate", run, "--json"], timeout=3600)
    if done.returncode:
        print(f"(b) canine evaluate: not measured, {canine.failure('evaluate', done)}", flush=True)
        return
    e = json.loads(done.stdout)
    masked = e["masked"]
    print(f"(b) canine evaluate, {e.get('validation_examples')} held-out examples "
          f"({' '.join(sorted(e.get('languages') or {}))}): masked-character accuracy "
          + ", ".join(f"{k} {v['accuracy']:.3f} (loss {v['loss']:.2f})" for k, v in masked.items()), flush=True)


def shape_of(run: str) -> list[str]:
    """--size/--set flags that give a fresh encoder the shape of a canine pretraining run (its config.yaml)."""
    import yaml

    cfg = yaml.safe_load(Path(run, "config.yaml").read_text())
    model = cfg.get("model") or {}
    flags = ["--size", model.get("size", "tiny")]
    for key, value in (model.get("overrides") or {}).items():
        flags += ["--set", f"model.{key}={','.join(map(str, value)) if isinstance(value, list) else value}"]
    return flags


def rows_spec(args, pretrained: str) -> list[tuple[str, str, list]]:
    """(label, row, init flags) of each row: (a) random init of (b)'s shape, (b) the pretrained
    run, (c) --init when given."""
    rows = [(f"(a) random init ({' '.join(shape_of(pretrained))})", "a", shape_of(pretrained)),
            (f"(b) pretrained here ({Path(pretrained).name})", "b", ["--init", pretrained])]
    if args.init:
        rows.append((f"(c) --init {args.init}", "c", ["--init", str(Path(args.init).resolve())
                                                      if Path(args.init).exists() else args.init]))
    return rows


def finetune(canine: Canine, args, row: str, lang: str, init_flags: list) -> dict:
    name = f"{row}-{lang}"
    files = [f"--{role}" for role in ("train", "dev", "test")]
    paths = [f"{lang}={Path(args.data, lang, role + '.txt').resolve()}" for role in ("train", "dev", "test")]
    done, wall = canine(f"ner-{name}", [
        "finetune", "ner", *[x for pair in zip(files, paths) for x in pair], *init_flags,
        "--output", f"ner/{name}", "--workers", args.workers, "--max-steps", args.steps,
        "--global-batch", args.batch, "--micro-batch", args.batch // args.workers, "--max-length", args.max_length,
        "--lr", args.lr, "--eval-every", args.eval_every, "--seed", args.seed, "--checkpoint-every", args.steps,
        "--json"])
    if done.returncode:
        print(f"  {name}: FAILED, {canine.failure('ner-' + name, done)}", flush=True)
        return {"failed": True, "wall": wall}
    s = json.loads(done.stdout)
    test, dev = s["test"]["languages"][lang], s["dev"]["languages"][lang]
    out = {"f1": test["f1"], "wall": wall, "reused": reused(canine, f"ner-{name}", done)}
    print(f"  {name}: test F1 {test['f1']:.3f} (P {test['precision']:.3f} R {test['recall']:.3f}, "
          f"{test['predicted_entities']} predicted / {test['gold_entities']} gold entities), dev F1 {dev['f1']:.3f}, "
          f"kept step {s['best_step']} of {s['max_steps']}, {s.get('examples_per_s')} windows/s, "
          f"wall {wall:.0f} s{' (reused)' if out['reused'] else ''}", flush=True)
    return out


def table(rows: dict, langs: list) -> str:
    def cell(x):
        return f"{x:7.1f}" if isinstance(x, float) else f"{x:>7}"

    def mean(xs):
        return sum(xs) / len(xs) if xs and all(isinstance(x, float) for x in xs) else "-"

    width = max(len(label) for label in rows) + 2
    lines = ["test F1 x 100 (conlleval's entity-level F1 at the best dev evaluation), one model per language",
             "".ljust(width) + "".join(f"{lang:>7}" for lang in langs) + f"{'mean':>7}"]
    for label, values in rows.items():
        lines.append(label.ljust(width) + "".join(cell(v) for v in values) + cell(mean(values)))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="MasakhaNER's data folder (LANG/train.txt, dev.txt, test.txt)")
    ap.add_argument("--langs", nargs="+", default=["swa", "hau", "yor"], help="languages (default: swa hau yor)")
    ap.add_argument("--work", default="/tmp/canine-downstream", help="runs, shards and logs (default: %(default)s)")
    ap.add_argument("--size", default="tiny", choices=("tiny", "small"), help="(b)'s pretraining config and (a)'s "
                    "shape (default: tiny)")
    ap.add_argument("--pretrain-steps", type=int, default=600, help="(b)'s pretraining steps (default: 600)")
    ap.add_argument("--pretrain-batch", type=int, default=16, help="(b)'s pretraining batch (default: 16)")
    ap.add_argument("--pretrain-seq-len", type=int, default=512, help="(b)'s example length (default: 512)")
    ap.add_argument("--pretrained", help="a canine pretraining run to use as (b) instead of pretraining one")
    ap.add_argument("--init", help="(c): any --init of canine finetune (a run, an export, a HF CANINE directory)")
    # The one fine-tuning budget of every row. lr 3e-3: a tiny encoder moves too little at BERT's 5e-5
    # (tests/training/finetune use 3e-3 too); 500 x 16 windows is ~3.5 epochs of swa's 2,388 windows.
    ap.add_argument("--steps", type=int, default=500, help="fine-tuning steps (default: 500)")
    ap.add_argument("--batch", type=int, default=16, help="windows per step (default: 16)")
    ap.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default: 3e-3)")
    ap.add_argument("--max-length", type=int, default=256, help="characters per window (default: 256; longer "
                    "sentences are read in overlapping windows)")
    ap.add_argument("--eval-every", type=int, default=250, help="dev/test evaluations, the best dev kept "
                    "(default: 250)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1, help="Ray Train workers per run (default: 1)")
    args = ap.parse_args(argv)

    data, work = Path(args.data), Path(args.work)
    for what, path in (("--data", data), ("--work", work)):
        if _inside(path, ROOT):
            raise SystemExit(f"{what} {path}: inside the repository; MasakhaNER is CC BY-NC 4.0 and the runs' "
                             "prediction files hold its sentences: keep both outside the tree")
    missing = [str(data / lang / f"{role}.txt") for lang in args.langs for role in ("train", "dev", "test")
               if not (data / lang / f"{role}.txt").is_file()]
    if missing:
        raise SystemExit(f"--data {data}: missing {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}; "
                         "git clone --depth 1 https://github.com/masakhane-io/masakhane-ner DIR, then --data DIR/data")
    if args.batch % args.workers or args.pretrain_batch % args.workers:
        raise SystemExit("--batch and --pretrain-batch must be multiples of --workers")
    work.mkdir(parents=True, exist_ok=True)
    canine = Canine(work.resolve())
    began = time.perf_counter()

    print(f"machine: {machine()}")
    print(f"command: {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"budget (every row): {args.steps} steps x {args.batch} windows of {args.max_length} characters, AdamW lr "
          f"{args.lr:g} (10% warm-up, linear decay), dev/test evaluated every {args.eval_every} steps (best dev kept), "
          f"seed {args.seed}, {args.workers} worker(s); languages {' '.join(args.langs)}; work {work}", flush=True)

    pretrained, _ = pretrain(canine, args)
    held_out(canine, pretrained)
    results = {}
    for label, row, flags in rows_spec(args, pretrained):
        print(f"{label}:", flush=True)
        results[label] = [finetune(canine, args, row, lang, flags) for lang in args.langs]

    rows = {label: [r["f1"] * 100 if "f1" in r else "failed" for r in rs] for label, rs in results.items()}
    for i, name in ((1, "CANINE-C"), (0, "mBERT"), (2, "CANINE-C + n-grams")):
        rows[f"paper: {name}"] = [PAPER[lang][i] if lang in PAPER else "n/a" for lang in args.langs]
    print()
    print(table(rows, args.langs))
    print(f"paper: {PAPER_SOURCE}, CANINE-base and mBERT-base fine-tuned to convergence")
    width = max(len(k) for k in rows) + 2
    print("wall seconds per fine-tuning run, Ray's start and the export included (r: finished before, reused)")
    print("".ljust(width) + "".join(f"{lang:>7}" for lang in args.langs))
    for label, rs in results.items():
        print(f"  {label[:3]}".ljust(width) + "".join(
            (f"{r['wall']:.0f}" + ("r" if r.get("reused") else "")).rjust(7) for r in rs))
    print(f"total wall {time.perf_counter() - began:.0f} s")
    return 1 if any(r.get("failed") for rs in results.values() for r in rs) else 0


if __name__ == "__main__":
    sys.exit(main())
