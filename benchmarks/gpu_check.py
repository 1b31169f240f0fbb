"""What a CPU test suite cannot see, checked on a CUDA machine in a few minutes. Run it whenever a
GPU is lent, and put its output in the note. Its first lines say what passed.

    python benchmarks/gpu_check.py                       # CANINE-base, every check (~8 min on an H100)
    python benchmarks/gpu_check.py --checks compile,lamb # no training runs (~3 min)
    python benchmarks/gpu_check.py --device cpu --config tiny --backend aot_eager --checks compile,lamb  # the script itself, on CPU

Checks (each PASS or FAIL with its figures):
- compile: every parameter's gradient after one backward, `model.compile()` (what DeepSpeed's
  engine.compile() does) against eager, base preset, dropout off, 8 x 2048, for CANINE-C and
  CANINE-S in each --precisions (training/train/compile_check.py; tolerances there, with reasons).
- lamb: one optimizer step of the base recipe's engine (LAMB, ZeRO-0, bf16 autocast over fp32
  weights) on this device against the reference LAMB (training/train/lamb.py) stepping a copy
  on the same device with the same (clipped) gradients: each parameter's change within 1e-4
  relative, so the trust ratio is per tensor (a ratio over a flattened group would be off by far
  more). The same reference stepped on the CPU is printed beside it: on an H100 the two devices'
  arithmetic differed by up to 1.5e-3 (docs/compile.md), so it is not the criterion.
- heads: the downstream heads on this device (training/downstream.py: CanineForTydiQA, the
  token classifier): one forward and backward under bf16 autocast, the loss finite and in fp32,
  every parameter with a finite gradient; and in fp32 (TF32 off) a TyDi window alone and padded
  in a batch of longer ones give the same span logits (min_padded_length's promise) within 1e-4.
- learn, learn-compiled: 60 steps of the base preset through the real trainer (Ray Train +
  DeepSpeed + the input pipeline, benchmarks/train_throughput.py) on synthetic shards, eager
  and with parallel.compile=true: the loss must fall by at least --min-drop nats (mean of steps
  1-3 against mean of the last 5; an eager H100 run fell 10.50 -> 4.29 in 40 steps, a run with
  zeroed gradients stayed at 10.49); prints examples/s, MFU and peak GPU memory.
"""

import argparse
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ.setdefault("DS_ACCELERATOR", "cpu")

from pipeline.synthetic import synthetic_rows  # noqa: E402
from training.batch import build_batch  # noqa: E402
from training.canine_config import of_size  # noqa: E402
from training.heads import CaninePretrainingModel  # noqa: E402
from training.train import compile_check  # noqa: E402

CHECKS = ("compile", "lamb", "heads", "learn", "learn-compiled")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checks", default=",".join(CHECKS), help=f"comma list of {', '.join(CHECKS)}")
    p.add_argument("--config", default="base", help="training preset (model size and recipe): base, small, tiny")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: run the script's code paths only")
    p.add_argument("--precisions", default="bf16", help="comma list of fp32, bf16 for the compile check")
    p.add_argument("--backend", default="inductor", help="torch.compile backend of the compile check")
    p.add_argument("--batch", type=int, default=8, help="examples of the compile and lamb checks")
    p.add_argument("--seq-len", type=int, default=0, help="0: 2048 (256 for tiny)")
    p.add_argument("--steps", type=int, default=60, help="steps of each learning run")
    p.add_argument("--min-drop", type=float, default=3.0, help="nats the learning runs' loss must fall")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for the learning runs")
    return p.parse_args(argv)


def _batch(model_cfg, objective, n, seq_len, device, seed=0):
    rows = synthetic_rows(n, seq_len, seed=seed, vocab_size=model_cfg.num_subword_vocab or 1000,
                          min_length=seq_len * 3 // 4)
    batch = build_batch(rows, seq_len, objective, seed=seed, num_hash_buckets=model_cfg.num_hash_buckets)
    return {k: v.to(device) for k, v in batch.items()}


def _model_config(args, objective, dropout=True):
    from training.train import config

    cfg = config.load_config(args.config)
    extra = {} if dropout else {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    return of_size(cfg.model.size, **{**cfg.model.overrides, **extra},
                  num_subword_vocab=1000 if objective == "subword" else 0)


def check_compile(args) -> tuple[bool, list[str]]:
    lines, ok = [], True
    for precision in args.precisions.split(","):
        for objective in ("char", "subword"):
            model_cfg = _model_config(args, objective, dropout=False)
            torch.manual_seed(0)
            model = CaninePretrainingModel(model_cfg, objective).to(args.device).train()
            batch = _batch(model_cfg, objective, args.batch, args.seq_len, args.device)
            eager_loss, eager = compile_check.one_backward(model, batch, precision)
            start = time.perf_counter()
            twin = compile_check.compiled_copy(model, args.backend)
            compiled_loss, compiled = compile_check.one_backward(twin, batch, precision)
            seconds = time.perf_counter() - start
            problems = compile_check.gradient_problems(eager, compiled, compile_check.RTOL[precision])
            learning = sum(g is not None and bool(g.any()) for g in eager.values())
            ok &= not problems
            lines.append(f"  {objective} {precision}: loss eager {eager_loss:.4f} compiled {compiled_loss:.4f}; "
                         f"{learning}/{len(eager)} parameters with a gradient; worst relative difference "
                         f"{compile_check.worst_difference(eager, compiled):.2e} (limit {compile_check.RTOL[precision]}); "
                         f"compile + step {seconds:.0f} s; {len(problems)} problems")
            lines += [f"    {p}" for p in problems[:10]]
            del model, twin, eager, compiled
            if args.device == "cuda":
                torch.cuda.empty_cache()
    return ok, lines


def _one_process_group(device: str) -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "LOCAL_RANK": "0",
                       "WORLD_SIZE": "1"})
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=0, world_size=1)


def check_lamb(args) -> tuple[bool, list[str]]:
    """The base recipe's engine step on this device against the reference LAMB on the CPU."""
    from training.train import config, engine, optim

    _one_process_group(args.device)
    precision = "bf16"
    cfg = config.load_config(args.config, {
        "parallel.device": args.device, "parallel.precision": precision, "parallel.workers": 1,
        "parallel.compile": False, "train.micro_batch": args.batch, "train.global_batch": args.batch,
        "data.streams": 1})
    if cfg.optim.name != "lamb":
        return False, [f"  the {args.config} config's optimizer is {cfg.optim.name}, not lamb"]
    model_cfg = config.model_config(cfg)
    models = []
    for _ in range(3):  # built from one seed each time: a deepcopy drops the `stacked_parts` marks LAMB groups by
        torch.manual_seed(0)
        models.append(CaninePretrainingModel(model_cfg, cfg.train.objective))
    model, reference, twin = models  # reference: fp32 on the CPU; twin: the same reference LAMB on this device
    twin.to(args.device)
    names = [n for n, _ in model.named_parameters()]
    wrapped = engine.wrap(model.to(args.device), cfg, world=1)
    seen = {}  # the gradients the optimizer steps with (after the clip hook, which was registered first)

    def capture(opt, *_):
        seen.update({id(p): p.grad.detach().float().clone() for g in opt.param_groups for p in g["params"]
                     if p.grad is not None})

    wrapped.optimizer.register_step_pre_hook(capture)
    own = {id(p) for p in model.parameters()}
    grouped = [p for g in wrapped.optimizer.param_groups for p in g["params"]]
    whole = all(id(p) in own for p in grouped) and len(grouped) == len(own)
    before = {n: p.detach().float().cpu().clone() for n, p in model.named_parameters()}
    batch = _batch(model_cfg, cfg.train.objective, args.batch, args.seq_len, args.device)
    with engine.autocast_for(args.device, precision):
        out = wrapped(batch)
    wrapped.backward(out.loss)
    wrapped.step()
    for ref in (reference, twin):
        ref_opt = optim.build_optimizer(ref, cfg.optim)
        optim.build_scheduler(ref_opt, cfg.optim, cfg.train.max_steps)  # the rate of update 0
        for p, q in zip(model.parameters(), ref.parameters()):
            grad = seen.get(id(p))
            q.grad = None if grad is None else grad.to(q.device)
        ref_opt.step()

    def worst(a, b, limit, label):
        """The largest relative difference between two models' changes of a parameter."""
        top, problems = 0.0, []
        for name, p, q in zip(names, a.parameters(), b.parameters()):
            moved, expected = p.detach().float().cpu() - before[name], q.detach().float().cpu() - before[name]
            if expected.norm() == 0:
                continue
            err = ((moved - expected).norm() / expected.norm()).item()
            top = max(top, err)
            if err > limit:
                problems.append(f"    {label}: {name}: change off by {err:.2e} relative")
        return top, problems

    # The engine must step exactly as the reference LAMB does on the same device; the same LAMB on
    # the CPU is shown beside it (a CPU-vs-GPU difference is arithmetic, not the engine's grouping).
    same, problems = worst(model, twin, 1e-4, "engine vs reference on this device")
    cpu, _ = worst(model, reference, float("inf"), "")
    apart, _ = worst(twin, reference, float("inf"), "")
    ok = whole and not problems and len(seen) == len(names)
    lines = [f"  optimizer {type(wrapped.optimizer).__name__}, groups hold the model's own tensors: {whole}; "
             f"{len(seen)}/{len(names)} gradients stepped; worst relative difference of a parameter's change "
             f"against the reference LAMB on this device {same:.2e} (limit 1e-4); against it on the CPU "
             f"{cpu:.2e} (the reference itself, this device vs CPU: {apart:.2e})"] + problems[:10]
    return ok, lines


def check_heads(args) -> tuple[bool, list[str]]:
    from training.downstream import CanineForTokenClassification, CanineForTydiQA, min_padded_length

    model_cfg, lines, ok = _model_config(args, "char", dropout=False), [], True
    n, length = args.batch, args.seq_len
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(33, 20000, (n, length), generator=g).to(args.device)
    mask = torch.ones_like(ids)
    types = (torch.arange(length, device=args.device)[None, :] >= 64).long().expand(n, -1)
    for name, model, labels in (
            ("tydiqa", CanineForTydiQA(model_cfg),
             {"start_positions": torch.full((n,), 70), "end_positions": torch.full((n,), 80),
              "answer_types": torch.full((n,), 3)}),
            ("token", CanineForTokenClassification(model_cfg, 9), {"labels": torch.randint(0, 9, (n, length), generator=g)})):
        model = model.to(args.device).train()
        batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types,
                 **{k: v.to(args.device) for k, v in labels.items()}}
        with torch.autocast(args.device, dtype=torch.bfloat16):
            out = model(batch)
        out.loss_sum.backward()
        unused = "encoder.pooler." if name == "token" else None  # the token classifier reads no pooled output
        bad = [k for k, p in model.named_parameters() if (p.grad is None or not torch.isfinite(p.grad).all())
               and not (unused and k.startswith(unused))]
        fine = bool(torch.isfinite(out.loss_sum)) and out.loss_sum.dtype == torch.float32 and not bad
        ok &= fine
        lines.append(f"  {name} bf16: loss {float(out.loss_sum.detach() / out.count):.4f} ({out.loss_sum.dtype}); "
                     f"{len(bad)} parameters without a finite gradient {bad[:3]}")
        del model
    model = CanineForTydiQA(model_cfg).to(args.device).eval()
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        short = length // 2 + 5
        alone = min_padded_length(model_cfg, short)
        with torch.no_grad():
            a = model.logits(ids[:1, :alone] * (torch.arange(alone, device=args.device) < short),
                             (torch.arange(alone, device=args.device) < short).long()[None], types[:1, :alone])
            padded = ids[:2].clone()
            padded[0, short:] = 0
            pmask = torch.ones_like(padded)
            pmask[0, short:] = 0
            b = model.logits(padded, pmask, types[:2])
        worst = max(float((a[i][0, :short] - b[i][0, :short]).abs().max()) for i in (0, 1))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    ok &= worst <= 1e-4
    lines.append(f"  tydiqa fp32: a {short}-character window padded to {alone} alone and to {length} in a batch: "
                 f"span logits differ by at most {worst:.2e} (limit 1e-4)")
    return ok, lines


def check_learn(args, compiled: bool) -> tuple[bool, list[str]]:
    import train_throughput

    seq_len = args.seq_len
    settings = [*args.set, f"parallel.compile={'true' if compiled else 'false'}"]
    if args.device == "cpu":
        settings.append("parallel.device=cpu")
    bench = train_throughput.parse_args(["--config", args.config, "--workers", "1", "--steps", str(args.steps),
                                         "--warmup", "5", "--seq-len", str(seq_len),
                                         *[a for s in settings for a in ("--set", s)]])
    base = train_throughput.config.load_config(args.config)
    with tempfile.TemporaryDirectory(prefix="canine-gpu-check-") as tmp:
        data = train_throughput.synthetic_data(os.path.join(tmp, "shards"), seq_len,
                                               rows=base.train.micro_batch * (args.steps + 4))
        r = train_throughput.run_one(bench, 1, data, os.path.join(tmp, "run"))
    losses = r["losses"]
    first, last = sum(losses[:3]) / 3, sum(losses[-5:]) / 5
    ok = first - last >= args.min_drop
    line = (f"  loss {first:.2f} -> {last:.2f} (drop {first - last:.2f}, needs {args.min_drop}) over {len(losses)} steps; "
            f"{r['examples_per_s']:.1f} ex/s, {r['chars_per_s']:.0f} chars/s, data wait {r['data_wait_fraction']:.1%}")
    if "mfu" in r:
        line += f", MFU {r['mfu']:.1%}"
    if "gpu_peak_mb_per_worker" in r:
        line += f", peak GPU memory {r['gpu_peak_mb_per_worker'] / 1024:.1f} GiB"
    grad_norms = [g for g in r.get("grad_norms", []) if g is not None]
    if grad_norms:
        line += f"; gnorm {min(grad_norms):.2f}..{max(grad_norms):.2f}"
    return ok, [line]


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (use --device cpu to run the script's code paths)", file=sys.stderr)
        return 2
    args.seq_len = args.seq_len or (256 if args.config == "tiny" else 2048)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # as the trainer's workers
    checks = [c for c in args.checks.split(",") if c]
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown:
        print(f"gpu_check: unknown checks {unknown}; choose from {CHECKS}", file=sys.stderr)
        return 2
    where = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    runs = {"compile": check_compile, "lamb": check_lamb, "heads": check_heads,
            "learn": lambda a: check_learn(a, compiled=False),
            "learn-compiled": lambda a: check_learn(a, compiled=True)}
    results = []
    for name in checks:
        print(f"gpu_check: {name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            ok, lines = runs[name](args)
        except Exception as e:  # a crash is a result too: report it with the others
            ok, lines = False, [f"  {type(e).__name__}: {e}"]
        results.append((name, ok, time.perf_counter() - start, lines))
    print(f"gpu_check on {where}, torch {torch.__version__}, config {args.config}, length {args.seq_len}:")
    for name, ok, seconds, _ in results:
        print(f"{'PASS' if ok else 'FAIL'} {name} ({seconds:.0f} s)")
    for name, ok, _, lines in results:
        print(f"{name}:")
        print("\n".join(lines))
    return 0 if all(ok for _, ok, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
