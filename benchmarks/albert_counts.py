"""Parameters and training FLOPs of ALBERT's two switches (Lan et al. 2020, §3.1) on CANINE.

    python benchmarks/albert_counts.py            # base and small sizes, seconds, no training

For each model size: the default model, `share_layers` (one deep layer applied num_hidden_layers
times), `embedding_size=128` (ALBERT's E: E-wide hash tables, then Linear(E, d)) and both.
Parameters are counted from the modules (built on the meta device: no memory, no init);
FLOPs are training (forward + backward) matmul FLOPs of one CANINE-C example at length 2048
(training/flops.py `pretraining_flops`, 320 predictions). docs/pretraining.md quotes the table.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contract import schema  # noqa: E402

VARIANTS = {  # name -> CanineConfig overrides
    "default": {},
    "share_layers": {"share_layers": True},
    "embedding_size=128": {"embedding_size": 128},
    "both": {"share_layers": True, "embedding_size": 128},
}
SEQ_LEN = schema.DEFAULT_SEQ_LEN


def counts(preset_name: str, overrides: dict) -> tuple[int, int, int]:
    """(encoder parameters, encoder + CANINE-C head parameters, training FLOPs per example)."""
    import torch

    from training import flops
    from training.canine_config import of_size
    from training.heads import CaninePretrainingModel
    from training.model import num_parameters

    config = of_size(preset_name, **overrides)
    with torch.device("meta"):
        model = CaninePretrainingModel(config, "char")
    return num_parameters(model.encoder), num_parameters(model), flops.pretraining_flops(config, "char", SEQ_LEN)


def main() -> int:
    header = f"| model size | variant | encoder params | + CANINE-C head | train GFLOPs / example (n = {SEQ_LEN}) |"
    print(header)
    print("|" + "|".join("---" for _ in range(header.count("|") - 1)) + "|")
    for name in ("base", "small"):
        for variant, overrides in VARIANTS.items():
            encoder, total, train_flops = counts(name, overrides)
            print(f"| {name} | {variant} | {encoder / 1e6:.1f}M | {total / 1e6:.1f}M | {train_flops / 1e9:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
