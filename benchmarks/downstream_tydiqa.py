"""TyDi QA's primary tasks (SelectP, MinSpan) end to end: random init against a CANINE pretrained here, one budget.

    python benchmarks/downstream_tydiqa.py                               # the official sample, ~10 min on 2 cores
    python benchmarks/downstream_tydiqa.py --pretrained runs/tiny        # skip the pretraining
    python benchmarks/downstream_tydiqa.py --init /models/canine-c       # adds row (c)
    python benchmarks/downstream_tydiqa.py --train /data/tydiqa/tydiqa-v1.0-train.jsonl.gz \
        --dev /data/tydiqa/tydiqa-v1.0-dev.jsonl.gz --init /models/canine-c --workers 8   # the real thing, on GPUs

WHAT THE DEFAULT RUN MEASURES, AND WHAT IT DOES NOT. Offline, the only TyDi QA data is the official
repository's sample, tests/data/tydiqa/tiny_dev.jsonl.gz: 11 real dev examples, one per language,
three annotations each. It is used as BOTH the training and the dev file, so a row's score says
how well a model memorised 11 examples (34 training windows), scored by tydi_eval.py's rules on
one example per language: each language's F1 is 0 or 1 or a partial span overlap, and the macro
average moves by 10 points with one example. That score is noise, not a measure of the encoder.
What the run does show: that `canine finetune tydiqa` goes end to end (the windowing Beam job,
the Ray Train + DeepSpeed run with its evaluations, RUN/predictions/dev.jsonl in tydi_eval.py's
format, the kept weights, the Hugging Face export) from a random and from a pretrained encoder,
and what each step costs on this machine. For a figure that means something, give --train and
--dev the official files (tydiqa-v1.0-{train,dev}.jsonl.gz: 166,916 and 18,670 examples) and a
pretrained base encoder: docs/downstream.md "TyDi QA" has the recipe and its estimated cost.

Every row is fine-tuned with ONE budget (printed), through `canine finetune tydiqa --json` as a
user runs it; the kept weights are those of the best dev evaluation (mean of the macro passage and
minimal F1) and their dev figures are the row's:
  (a) random initialisation: `--size` of (b)'s shape, no --init;
  (b) a CANINE-C pretrained by this project on the real Wikipedia pages of tests/data/wiki (14
      languages: `canine preprocess`, then `canine pretrain --config SIZE` for --pretrain-steps;
      benchmarks/downstream_ner.py's functions), or the run given as --pretrained;
  (c) with --init, any model `canine finetune --init` takes (a canine run or export, a Hugging
      Face CANINE directory such as google/canine-c downloaded beforehand).
On the sample the windows are short (256 characters, stride 128, the question's last 64
characters: 96 training and 898 dev windows) so a CPU run takes minutes; with --train/--dev the
command's own defaults apply (Google's: 2048, 512, 256; batch 512, lr 5e-5, 10 epochs) unless a
flag is given.

Beside the rows: the CANINE paper's TyDi QA figures (Clark et al., "CANINE: Pre-training an
Efficient Tokenization-Free Encoder for Language Representation", TACL 2022, arXiv 2103.06874):
Table 2's macro SelectP / MinSpan F1 and Table 7's per-language breakdown, for mBERT (their own
re-trained mBERT; Table 2 also gives the public mBERT's 63.1 / 50.5), CANINE-S, CANINE-C and
CANINE-C + n-grams: base-size encoders (127M-167M parameters at fine-tuning) pretrained 124k
steps at batch 4096 on mBERT's 104-language Wikipedia, fine-tuned on TyDi QA's training set,
each figure the mean of 3 fine-tuning replicas. A ceiling, not a comparable row.

Runs go under --work (default /tmp/canine-downstream, shared with downstream_ner.py: the same
pretraining run is reused): shards/, pretrain-SIZE-STEPS/, tydiqa/ROW/ and logs/; a finished run
is not run again (canine's own resume), its wall time then marked "reused".

Measured, `python benchmarks/downstream_tydiqa.py` (the defaults; a fresh --work; 2-core AMD EPYC shared
with other jobs, load average 3.5-5.7, 2026-12-02; 448 s in all). Its output, the long lines cut:
  budget (every row): 150 steps x 16 windows of 256 characters (stride 128, question 64), AdamW lr 0.003 (10%
    warm-up, linear decay), dev evaluated every 75 steps (best macro F1 kept), seed 0, 1 worker(s)
  preprocess: 54 real Wikipedia pages of 14 languages (ar bn el en hi hy ja kn ko mr ru uk vi zh) ...; 8 s
  (b) pretrained here: tiny, 200 steps x 16 x 512 codepoints ...; loss 7.6617 -> 4.8019, held-out loss 3.3079 /
    masked-character accuracy 0.1186; 13999.5 chars/s; wall 162 s
  (b) canine evaluate, 102 held-out examples (en): masked-character accuracy pretrained 0.123 (loss 3.28),
    initial 0.000 (loss 7.67), unigram 0.123 (loss 3.83)
    a: dev macro passage (SelectP) F1 20.0, minimal (MinSpan) F1 20.0 (non-null thresholds 2/2); kept step 150 of
    150; loss 4.3158 -> 0.1118; windows train 96 dev 898; 78.69 windows/s; peak RSS per worker 1004.9 MB; export
    yes; wall 72 s
    b: dev macro passage (SelectP) F1 20.0, minimal (MinSpan) F1 3.6 (non-null thresholds 2/2); kept step 75 of
    150; loss 4.2127 -> 0.1235; windows train 96 dev 898; 81.33 windows/s; peak RSS per worker 965.7 MB; export
    yes; wall 76 s
  dev passage (SelectP) F1 x 100, tydi_eval.py's definition at each language's best threshold
                                             (en)    ar    bn    fi    id    ja    ko    ru    sw    te    th  macro
  (a) random init (--size tiny)               0.0 100.0   0.0   0.0 100.0   0.0   0.0   0.0   0.0   0.0   0.0   20.0
  (b) pretrained here (pretrain-tiny-200)     0.0 100.0   0.0   0.0 100.0   0.0   0.0   0.0   0.0   0.0   0.0   20.0
  paper: mBERT                               62.2  82.3  58.5  60.4  61.3  46.2  60.2  62.2  58.8  81.0  61.1   63.2
  paper: CANINE-S                            58.6  82.8  61.8  62.2  63.5  51.7  60.3  64.6  67.8  82.5  62.8   66.0
  paper: CANINE-C                            61.6  82.5  62.5  63.6  64.2  49.7  59.7  65.6  67.0  81.1  61.2   65.7
  paper: CANINE-C + n-grams                  64.6  84.3  66.0  66.7  65.9  51.2  60.6  68.5  67.2  84.6  65.8   68.1
  paper: mBERT (public)                         -     -     -     -     -     -     -     -     -     -     -   63.1
  dev minimal answer (MinSpan) F1 x 100
                                             (en)    ar    bn    fi    id    ja    ko    ru    sw    te    th  macro
  (a) random init (--size tiny)               0.0 100.0   0.0   0.0 100.0   0.0   0.0   0.0   0.0   0.0   0.0   20.0
  (b) pretrained here (pretrain-tiny-200)     0.0  25.0   0.0   0.0  10.5   0.0   0.0   0.0   0.0   0.0   0.0    3.6
  paper: mBERT                               46.0  70.7  47.3  51.1  52.2  36.1  36.8  45.6  49.4  75.6  48.4   51.3
  paper: CANINE-S                            46.3  66.9  46.7  53.0  53.6  40.3  35.7  46.7  59.0  75.2  47.9   52.5
  paper: CANINE-C                            49.0  65.6  52.5  53.8  54.4  40.7  36.5  47.2  57.6  74.2  47.1   53.0
  paper: CANINE-C + n-grams                  51.8  73.0  57.1  57.1  56.8  42.0  39.9  51.5  59.2  79.7  54.2   57.0
  paper: mBERT (public)                         -     -     -     -     -     -     -     -     -     -     -   50.5
  the rows above: 1 example per language, trained on the very examples scored: noise, not a measure. The sample's
    ceiling (a perfect model): passage 30.0, minimal 30.0: only arabic, indonesian, russian have an answer enough
    annotators agree on (2 of 3); every other language scores 0 whatever is predicted
  wall seconds per fine-tuning run (...): (a) 72, (b) 76
  total wall 448 s
An earlier run of the same command (its own fresh --work, load 5.5-8) gave the same scores and losses to the
last digit (the runs are seeded), in 479 s. The official tydi_eval.py, run on each row's
RUN/predictions/dev.jsonl, printed the same macro figures (0.200 / 0.200 and 0.200 / 0.036). Of each
fine-tuning run's ~75 s: the windowing job and imports ~7 s, Ray's start and DeepSpeed ~25 s, 150 steps and
2 evaluations of 898 windows ~35 s, the export ~8 s.
So: the pipeline runs end to end from a random and from a pretrained encoder; the F1 figures are noise (see above).
"""

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from downstream_ner import Canine, _inside, held_out, machine, pretrain, reused, rows_spec  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "tydiqa" / "tiny_dev.jsonl.gz"

# tydi_eval.py's languages in the paper's Table 7 order; English is scored but left out of the
# macro average (tydi_eval.py main(), and the paper: "English is parenthesized because it is not
# included in the overall score calculation").
LANGUAGES = ("english", "arabic", "bengali", "finnish", "indonesian", "japanese", "korean", "russian",
             "swahili", "telugu", "thai")
SHORT = {"english": "(en)", "arabic": "ar", "bengali": "bn", "finnish": "fi", "indonesian": "id",
         "japanese": "ja", "korean": "ko", "russian": "ru", "swahili": "sw", "telugu": "te", "thai": "th"}

# Clark et al. 2022 (TACL; arXiv 2103.06874), F1 x 100. Read from two stored text copies of the
# TACL version (a markdown rendering with HTML tables, and an ar5iv-style HTML rendering; they
# agree figure for figure; the MIT Press "view large" page of Table 6 agrees with both on CANINE-S's
# 66.0 / 52.5). Table 7 (appendix), "Language-wise breakdown for TyDi QA primary tasks"; its
# "Macro Avg" row equals Table 2's SelectP / MinSpan columns. Its mBERT is the paper's own re-trained
# mBERT ("mBERT (ours)" in Table 2); Table 2's "mBERT (public)" row has macro figures only.
PAPER_MODELS = ("mBERT", "CANINE-S", "CANINE-C", "CANINE-C + n-grams")
PAPER = {  # language: ((SelectP per model), (MinSpan per model)), models in PAPER_MODELS' order
    "english": ((62.2, 58.6, 61.6, 64.6), (46.0, 46.3, 49.0, 51.8)),
    "arabic": ((82.3, 82.8, 82.5, 84.3), (70.7, 66.9, 65.6, 73.0)),
    "bengali": ((58.5, 61.8, 62.5, 66.0), (47.3, 46.7, 52.5, 57.1)),
    "finnish": ((60.4, 62.2, 63.6, 66.7), (51.1, 53.0, 53.8, 57.1)),
    "indonesian": ((61.3, 63.5, 64.2, 65.9), (52.2, 53.6, 54.4, 56.8)),
    "japanese": ((46.2, 51.7, 49.7, 51.2), (36.1, 40.3, 40.7, 42.0)),
    "korean": ((60.2, 60.3, 59.7, 60.6), (36.8, 35.7, 36.5, 39.9)),
    "russian": ((62.2, 64.6, 65.6, 68.5), (45.6, 46.7, 47.2, 51.5)),
    "swahili": ((58.8, 67.8, 67.0, 67.2), (49.4, 59.0, 57.6, 59.2)),
    "telugu": ((81.0, 82.5, 81.1, 84.6), (75.6, 75.2, 74.2, 79.7)),
    "thai": ((61.1, 62.8, 61.2, 65.8), (48.4, 47.9, 47.1, 54.2)),
    "macro": ((63.2, 66.0, 65.7, 68.1), (51.3, 52.5, 53.0, 57.0)),  # Table 2 = Table 7's Macro Avg
}
PAPER_PUBLIC_MBERT = (63.1, 50.5)  # Table 2, "mBERT (public)", taken there from the TyDi QA paper
PAPER_SOURCE = "Clark et al. 2022, CANINE (TACL; arXiv 2103.06874), Table 2 (macro) and Table 7 (per language)"

# The sample's budget: every flag the command is given on tiny_dev. lr 3e-3: a tiny encoder barely
# moves at BERT's 5e-5 in a few hundred steps (downstream_ner.py, tests/training/finetune). 150
# steps x 16 windows is 25 passes over the sample's 96 training windows.
SAMPLE_BUDGET = {"steps": 150, "batch": 16, "lr": 3e-3, "eval_every": 75, "max_length": 256, "stride": 128,
                 "max_question": 64}


def finetune(canine: Canine, args, row: str, init_flags: list) -> dict:
    name = f"tydiqa-{row}"
    flags = ["--max-steps", args.steps, "--global-batch", args.batch, "--lr", args.lr, "--eval-every", args.eval_every,
             "--max-length", args.max_length, "--stride", args.stride]
    flags = [x for flag, value in zip(flags[::2], flags[1::2]) if value is not None for x in (flag, value)]
    if args.batch is not None:
        flags += ["--micro-batch", args.batch // args.workers]
    if args.max_question is not None:
        flags += ["--set", f"task.max_question={args.max_question}"]
    if args.steps is not None:
        flags += ["--checkpoint-every", args.steps]
    done, wall = canine(name, [
        "finetune", "tydiqa", "--train", args.train, "--dev", args.dev, *init_flags, "--output", f"tydiqa/{row}",
        "--workers", args.workers, "--seed", args.seed, *flags, "--set", "log.tensorboard=false", "--json"])
    if done.returncode:
        print(f"  {row}: FAILED, {canine.failure(name, done)}", flush=True)
        return {"failed": True, "wall": wall}
    s = json.loads(done.stdout)
    dev = s["dev"]
    out = {"wall": wall, "reused": reused(canine, name, done), "dev": dev, "summary": s}
    windows = s.get("windows") or {}
    print(f"  {row}: dev macro passage (SelectP) F1 {dev['macro']['passage']['f1'] * 100:.1f}, minimal (MinSpan) F1 "
          f"{dev['macro']['minimal']['f1'] * 100:.1f} (non-null thresholds {dev['overall']['thresholds']['passage']}/"
          f"{dev['overall']['thresholds']['minimal']}); kept step {s['best_step']} of {s['max_steps']}; loss "
          f"{s.get('first_loss')} -> {s.get('final_loss')}; windows train {windows.get('train', {}).get('rows')} dev "
          f"{windows.get('dev', {}).get('rows')}; {s.get('examples_per_s')} windows/s; peak RSS per worker "
          f"{s.get('peak_rss_mb_per_worker')} MB; export {'yes' if s.get('hf_export') else 'no'}; wall {wall:.0f} s"
          f"{' (reused)' if out['reused'] else ''}", flush=True)
    return out


def ceiling(dev: str) -> dict:
    """The best macro F1 x 100 any model can score on `dev`, per task: tydi_eval.py gives a language
    without a gold answer F1 0 whatever is predicted, and an example has a gold answer only if
    enough annotators gave one (eval_utils.gold_has_passage_answer / gold_has_minimal_answer, with
    the thresholds the run uses: training/finetune/tydi.py thresholds)."""
    from training.finetune import tydi, tydi_score

    gold = tydi_score.read_gold(dev)
    passage_t, minimal_t = tydi.thresholds(gold)
    answered = {"passage": set(), "minimal": set()}
    for g in gold.values():
        if sum(label.passage_index >= 0 for label in g.labels) >= passage_t:
            answered["passage"].add(g.language)
        if sum(min(label.minimal) >= 0 or label.yes_no != "none" for label in g.labels) >= minimal_t:
            answered["minimal"].add(g.language)
    scored = [lang for lang in LANGUAGES if lang != tydi_score.EXCLUDED_FROM_MACRO]
    return {task: (100.0 * len(langs - {tydi_score.EXCLUDED_FROM_MACRO}) / len(scored), sorted(langs))
            for task, langs in answered.items()}


def table(title: str, rows: dict) -> str:
    """One task's F1 x 100: a row per run and per paper model, a column per language and the macro."""
    def cell(x):
        return f"{x:6.1f}" if isinstance(x, float) else f"{x:>6}"

    width = max(len(label) for label in rows) + 2
    lines = [title, "".ljust(width) + "".join(f"{SHORT[lang]:>6}" for lang in LANGUAGES) + f"{'macro':>7}"]
    for label, values in rows.items():
        lines.append(label.ljust(width) + "".join(cell(values.get(lang, "-")) for lang in LANGUAGES)
                     + " " + cell(values.get("macro", "-")))
    return "\n".join(lines)


def task_rows(results: dict, task: str) -> dict:
    i = 0 if task == "passage" else 1
    rows = {}
    for label, r in results.items():
        if r.get("failed"):
            rows[label] = {"macro": "failed"}
            continue
        langs = r["dev"]["languages"]
        rows[label] = {lang: langs[lang][task]["f1"] * 100 for lang in LANGUAGES if lang in langs}
        rows[label]["macro"] = r["dev"]["macro"][task]["f1"] * 100
    for m, model in enumerate(PAPER_MODELS):
        rows[f"paper: {model}"] = {lang: PAPER[lang][i][m] for lang in (*LANGUAGES, "macro")}
    rows["paper: mBERT (public)"] = {"macro": PAPER_PUBLIC_MBERT[i]}
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", help="official primary-task training file (default: the sample, tiny_dev.jsonl.gz)")
    ap.add_argument("--dev", help="official primary-task dev file (default: the sample, tiny_dev.jsonl.gz)")
    ap.add_argument("--work", default="/tmp/canine-downstream", help="runs, shards and logs (default: %(default)s, "
                    "shared with downstream_ner.py)")
    ap.add_argument("--size", default="tiny", choices=("tiny", "small"), help="(b)'s pretraining config and (a)'s "
                    "shape (default: tiny)")
    ap.add_argument("--pretrain-steps", type=int, default=200, help="(b)'s pretraining steps (default: 200)")
    ap.add_argument("--pretrain-batch", type=int, default=16, help="(b)'s pretraining batch (default: 16)")
    ap.add_argument("--pretrain-seq-len", type=int, default=512, help="(b)'s example length (default: 512)")
    ap.add_argument("--pretrained", help="a canine pretraining run to use as (b) instead of pretraining one")
    ap.add_argument("--init", help="(c): any --init of canine finetune (a run, an export, a HF CANINE directory)")
    budget = "(default: %s on the sample; the command's own with --train/--dev)"
    ap.add_argument("--steps", type=int, help="fine-tuning steps " + budget % SAMPLE_BUDGET["steps"])
    ap.add_argument("--batch", type=int, help="windows per step " + budget % SAMPLE_BUDGET["batch"])
    ap.add_argument("--lr", type=float, help="peak learning rate " + budget % SAMPLE_BUDGET["lr"])
    ap.add_argument("--eval-every", type=int, help="steps between dev evaluations, the best kept "
                    + budget % SAMPLE_BUDGET["eval_every"])
    ap.add_argument("--max-length", type=int, help="characters per window " + budget % SAMPLE_BUDGET["max_length"])
    ap.add_argument("--stride", type=int, help="characters between windows " + budget % SAMPLE_BUDGET["stride"])
    ap.add_argument("--max-question", type=int, help="the question's last characters kept "
                    + budget % SAMPLE_BUDGET["max_question"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1, help="Ray Train workers per run (default: 1)")
    args = ap.parse_args(argv)

    sample = not (args.train or args.dev)
    if bool(args.train) != bool(args.dev):
        raise SystemExit("--train and --dev go together (the official training and dev files); without either, the "
                         "sample is both")
    if sample:
        args.train = args.dev = str(SAMPLE)
        for key, value in SAMPLE_BUDGET.items():
            if getattr(args, key) is None:
                setattr(args, key, value)
    else:
        args.train, args.dev = (str(Path(p).resolve()) for p in (args.train, args.dev))
        missing = [p for p in (args.train, args.dev) if not Path(p).is_file()]
        if missing:
            raise SystemExit(f"{', '.join(missing)}: no such file (tydiqa-v1.0-train.jsonl.gz and "
                             "tydiqa-v1.0-dev.jsonl.gz: https://storage.cloud.google.com/tydiqa/v1.0/)")
    work = Path(args.work)
    if _inside(work, ROOT):
        raise SystemExit(f"--work {work}: inside the repository; keep runs outside the tree")
    if (args.batch and args.batch % args.workers) or args.pretrain_batch % args.workers:
        raise SystemExit("--batch and --pretrain-batch must be multiples of --workers")
    work.mkdir(parents=True, exist_ok=True)
    canine = Canine(work.resolve())
    began = time.perf_counter()

    def shown(value, what):
        if value is None:
            return f"the command's {what}"
        return f"{value:g}" if isinstance(value, float) else str(value)

    print(f"machine: {machine()}")
    print(f"command: {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"data: train {args.train}, dev {args.dev}" + (" (the official sample: 11 dev examples, one per "
          "language, as both train and dev; a score on them is noise: the run shows the pipeline and its cost)"
          if sample else ""))
    print(f"budget (every row): {shown(args.steps, '10 epochs')} steps x {shown(args.batch, 'batch (512)')} windows of "
          f"{shown(args.max_length, 'length (2048)')} characters (stride {shown(args.stride, '512')}, question "
          f"{shown(args.max_question, '256')}), AdamW lr {shown(args.lr, 'lr (5e-5)')} (10% warm-up, linear decay), "
          f"dev evaluated every {shown(args.eval_every, 'epoch')} steps (best macro F1 kept), seed {args.seed}, "
          f"{args.workers} worker(s); work {work}", flush=True)

    pretrained, _ = pretrain(canine, args)
    held_out(canine, pretrained)
    results = {}
    for label, row, flags in rows_spec(args, pretrained):
        print(f"{label}:", flush=True)
        results[label] = finetune(canine, args, row, flags)

    print()
    print(table("dev passage (SelectP) F1 x 100, tydi_eval.py's definition at each language's best threshold",
                task_rows(results, "passage")))
    print()
    print(table("dev minimal answer (MinSpan) F1 x 100", task_rows(results, "minimal")))
    print(f"paper: {PAPER_SOURCE}; base-size encoders fine-tuned on the full training set, mean of 3 replicas; "
          "macro excludes English")
    if sample:
        best = ceiling(args.dev)
        print(f"the rows above: 1 example per language, trained on the very examples scored: noise, not a measure. "
              f"The sample's ceiling (a perfect model): passage {best['passage'][0]:.1f}, minimal "
              f"{best['minimal'][0]:.1f}: only {', '.join(best['passage'][1])} have an answer enough annotators "
              "agree on (2 of 3); every other language scores 0 whatever is predicted")
    print("wall seconds per fine-tuning run (windowing job, Ray's start, training, evaluations, export; r: reused): "
          + ", ".join(f"{label[:3]} {r['wall']:.0f}{'r' if r.get('reused') else ''}" for label, r in results.items()))
    print(f"total wall {time.perf_counter() - began:.0f} s")
    return 1 if any(r.get("failed") for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
