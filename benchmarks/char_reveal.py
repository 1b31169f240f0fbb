"""CANINE-C's two readings of the reveal order, trained on the same data for the same steps.

    python benchmarks/char_reveal.py                      # tiny, 300 steps, seeds 0 and 1 (~15 min on 2 cores)
    python benchmarks/char_reveal.py --steps 100 --seeds 0

The bundled sample is preprocessed once (length 512, as `canine smoke`), then the tiny CANINE-C
model is pretrained with `model.char_reveal` = "two_stream" and "shifted" (training/heads.py,
CharHead), everything else equal: data order, initial weights (the seed), steps. Printed per
run and averaged: the final validation loss and character accuracy of the CANINE-C objective
(the first `data.eval_examples` validation examples, targeted at their masked characters).
docs/pretraining.md reports the figures that chose the default.
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REVEALS = ("two_stream", "shifted")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seeds", default="0,1", help="comma-separated train.seed values; each runs both readings")
    ap.add_argument("--work", default="", help="directory for shards and runs (default: a temporary one)")
    args = ap.parse_args()

    from jobs import quiet
    from pipeline.run import preprocess
    from pipeline.preprocess_config import PreprocessConfig
    from training.train.config import load_config
    from training.train.run import pretrain

    quiet.install()  # the console `canine` gives: no third-party noise lines
    work = Path(args.work or tempfile.mkdtemp(prefix="char_reveal_"))
    shards = work / "shards"
    preprocess(PreprocessConfig(inputs=(str(ROOT / "pipeline" / "sample" / "*.xml"),), output=str(shards), seq_len=512,
                                vocab_size=4000, validation_fraction=0.05), workers=2, progress=False)
    results = {r: [] for r in REVEALS}
    for seed in [int(s) for s in args.seeds.split(",")]:
        for reveal in REVEALS:
            cfg = load_config("tiny", {"data.path": str(shards), "output": str(work / f"{reveal}-seed{seed}-{args.steps}steps"),
                                       "train.max_steps": args.steps, "train.seed": seed, "train.eval_every": 0,
                                       "model.char_reveal": reveal, "log.console_every": max(1, args.steps // 6)})
            summary = pretrain(cfg)
            results[reveal].append((summary["eval_loss"], summary["eval_accuracy"]))
            print(f"seed {seed}  {reveal:10}  validation loss {summary['eval_loss']:.4f}  "
                  f"accuracy {summary['eval_accuracy']:.4f}", flush=True)
    print(f"\ntiny CANINE-C, {args.steps} steps, seeds {args.seeds}: mean over seeds")
    for reveal, rows in results.items():
        print(f"  {reveal:10}  validation loss {statistics.mean(r[0] for r in rows):.4f}  "
              f"character accuracy {statistics.mean(r[1] for r in rows):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
