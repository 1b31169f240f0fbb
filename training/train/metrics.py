"""Rank 0's metric sinks, OUTPUT/metrics.jsonl (every step), TensorBoard and MLflow (log.mlflow,
tracking.py); the driver's console
progress, which rank 0 sends it through Ray; MFU and memory figures.

metrics.jsonl holds one JSON object per optimizer step: step, loss, accuracy, lr, grad_norm,
examples_per_s, chars_per_s, data_wait_fraction, peak_rss_mb, mfu (GPU only), and eval_loss /
eval_accuracy on evaluation steps. A resumed run first drops the lines after its checkpoint, so the
file always reads as one uninterrupted run; a last line torn by a crash mid-write is dropped too.
For a remote OUTPUT the files are written locally and copied up at every checkpoint and at the end
(object stores cannot append), metrics.jsonl as one whole object (atomic_write).

The progress lines are printed by the driver (`ProgressPrinter`), not by the workers: a local Ray
cluster is started without forwarding worker logs, which on a dashboard-less local cluster would
be mostly Ray's own chatter (its placement-group cleaner warns every second that it cannot reach
the state API). Rank 0 sends the records of console steps to a `ProgressSink` actor the driver
holds, rather than the driver following metrics.jsonl: on an object store that file is one object
rewritten whole, so following it would mean re-uploading a growing file every few seconds (or
seeing progress only at checkpoints), and the driver polling the store every second.
A fire-and-forget actor call costs rank 0 well under a millisecond per console line, makes no
store request, and works alike for local and remote outputs. Rank 0 says through the same actor
what the workers do before their first step (`ProgressSink.say`): Ray Train's workers up, the
model and DeepSpeed's engine built, the first batches read, 20-60 s that were silent.
`said_if_slow` says what the driver waits for when a wait that is usually short runs long.
"""

import contextlib
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import threading

import fsspec

from contract.files import atomic_write, is_local
from training.train import rundir
from training.train.rundir import METRICS, TENSORBOARD

# Dense bf16 peak TFLOP/s per accelerator (vendor datasheets, without sparsity), for MFU.
PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.1, "L4": 121.0, "A10": 125.0}


def peak_flops(device_name: str, override_tflops: float = 0.0) -> float | None:
    """Peak FLOP/s of one accelerator; None when unknown (then no MFU is reported)."""
    if override_tflops:
        return override_tflops * 1e12
    for key, tflops in PEAK_TFLOPS.items():
        if key in device_name.upper():
            return tflops * 1e12
    return None


def peak_rss_mb() -> float:
    """Peak resident memory of this process (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class MetricsLog:
    def __init__(self, output_url: str, resume_step: int, tensorboard: bool, tracker=None):
        self.fs, self.remote = fsspec.core.url_to_fs(output_url)
        self.url = rundir.join(output_url, METRICS)
        self.is_local = is_local(self.fs)
        self.dir = self.remote if self.is_local else tempfile.mkdtemp(prefix="canine-metrics-")
        os.makedirs(self.dir, exist_ok=True)
        # Keep only the steps the checkpoint covers: the ones after it will be trained again.
        kept = [r for r in rundir.read_metrics(output_url) if r.get("step", 0) <= resume_step]
        self.path = os.path.join(self.dir, METRICS)
        atomic_write(self.path, "".join(json.dumps(r) + "\n" for r in kept).encode("utf-8"))
        self.file = open(self.path, "a", encoding="utf-8")
        self.tracker = tracker  # training/train/tracking.py's Tracker (log.mlflow), or None
        self.tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step: TensorBoard hides events of an earlier attempt from this step on.
            self.tb = SummaryWriter(os.path.join(self.dir, TENSORBOARD), purge_step=resume_step + 1)

    def log(self, record: dict) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        if self.tb is not None:
            for key, value in record.items():
                if key != "step" and isinstance(value, (int, float)):
                    self.tb.add_scalar(f"{'eval' if key.startswith('eval_') else 'train'}/{key}", value, record["step"])
        if self.tracker is not None:
            self.tracker.log(record)

    def sync(self) -> None:
        """At a checkpoint: make the lines it covers durable; copy the files to a remote OUTPUT."""
        self.file.flush()
        os.fsync(self.file.fileno())
        if self.tb is not None:
            self.tb.flush()
        if self.tracker is not None:  # the steps the checkpoint covers, in batches
            self.tracker.flush()
        if not self.is_local:
            with open(self.path, "rb") as f:
                atomic_write(self.url, f.read())
            if self.tb is not None:  # event files: append-only records, nothing a resume reads
                tb_remote = rundir.join(self.remote, TENSORBOARD)
                self.fs.put(os.path.join(self.dir, TENSORBOARD) + "/", tb_remote, recursive=True)

    def close(self) -> None:
        self.sync()
        self.file.close()
        if self.tb is not None:
            self.tb.close()
        if not self.is_local:
            shutil.rmtree(self.dir, ignore_errors=True)


def console_line(r: dict, max_steps: int, now: float | None = None, steps_per_s: float | None = None) -> str:
    """One compact progress line: wall-clock time, step, figures, steps/s and the ETA of the
    remaining steps. `steps_per_s` defaults to this step's own rate (1 / step_s: a step's time
    without its evaluation); a caller holding a longer average (evaluations and checkpoints
    included) gives a steadier ETA by passing it. `now`: seconds since the epoch (default: now)."""
    import time

    width = len(str(max_steps))
    if steps_per_s is None and r.get("step_s"):
        steps_per_s = 1.0 / r["step_s"]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() if now is None else now))
    parts = [stamp, f"step {r['step']:>{width}}/{max_steps}", f"loss {r['loss']:.4f}",
             f"acc {r.get('accuracy', 0):.3f}", f"lr {r['lr']:.2e}",
             "gnorm " + ("-" if r.get("grad_norm") is None else f"{r['grad_norm']:.2f}"),
             "-" if not steps_per_s else (f"{steps_per_s:.2f} steps/s" if steps_per_s < 10 else f"{steps_per_s:.0f} steps/s"),
             f"{r['examples_per_s']:.1f} ex/s",
             f"{r['chars_per_s'] / 1e3:.1f}k ch/s", f"wait {r['data_wait_fraction']:.0%}"]
    if "sop_accuracy" in r:  # ALBERT's sentence order, on shards packed with --sentence-order
        parts.append(f"sop acc {r['sop_accuracy']:.3f}")
    if "mfu" in r:
        parts.append(f"mfu {r['mfu']:.1%}")
    left = max(0, max_steps - r["step"])
    if left and steps_per_s:
        s = int(round(left / steps_per_s))
        h, m = divmod(s // 60, 60)
        parts.append(f"ETA {h}:{m:02d}:{s % 60:02d}" if h else f"ETA {m}:{s % 60:02d}")
    if "eval_loss" in r:
        parts.append(f"| eval loss {r['eval_loss']:.4f} acc {r['eval_accuracy']:.3f}"
                     + (f" sop acc {r['eval_sop_accuracy']:.3f}" if "eval_sop_accuracy" in r else "")
                     # a fine-tuning run's entity-level F1 (training/finetune/loop.py): dev, then test
                     + (f" F1 dev {r['eval_f1']:.3f}" if "eval_f1" in r else "")
                     + (f" test {r['test_f1']:.3f}" if "test_f1" in r else ""))
    return "  ".join(parts)


def on_console(record: dict, every: int, max_steps: int) -> bool:
    """Whether a step gets a console line: evaluations, every `every` steps, the first and the last."""
    step = record["step"]
    return "eval_loss" in record or step % max(1, every) == 0 or step in (1, max_steps)


class ProgressSink:
    """The records rank 0 sends (`put`, fire and forget) until the driver takes them, and its
    status lines (`say`: what the workers do before their first step, which takes a minute or
    more). Run as a Ray actor of 0 CPUs, so it takes nothing from the workers or the input pipeline."""

    def __init__(self):
        self._records = []

    def put(self, record: dict) -> None:
        self._records.append(record)

    def say(self, text: str) -> None:
        self._records.append({"status": text})

    def take(self) -> list[dict]:
        records, self._records = self._records, []
        return records


SLOW_S = 5.0  # a wait said once it has lasted this long (`said_if_slow`)


@contextlib.contextmanager
def said_if_slow(say, text: str, after_s: float | None = None):
    """Say `text` once, from a timer thread, if the block still runs after `after_s` seconds (default
    SLOW_S): for a wait that is usually short and sometimes minutes (an MLflow server slow to
    answer), so a fast one adds no line. `say` None: nothing."""
    if say is None:
        yield
        return
    timer = threading.Timer(SLOW_S if after_s is None else after_s, say, (text,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def stamped(text: str) -> None:
    """A status line on stderr in the progress lines' style: the time, then the text."""
    import time

    sys.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')}  {text}\n")
    sys.stderr.flush()


class ProgressPrinter:
    """A driver thread that prints a console line for each record rank 0 sends to `self.sink`
    (see `on_console`), and each status line rank 0 says through it with `say` (the command's
    own voice, run.py's `_say`; by default `stamped`). A step printed once is not printed again
    when workers restarted from a checkpoint train it a second time."""

    def __init__(self, max_steps: int, interval_s: float = 1.0, say=stamped):
        import ray

        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # On the driver's own node: anywhere else it would die with that node, and with it the
        # progress of a run that Ray Train restarts on the remaining nodes.
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self.sink = ray.remote(num_cpus=0)(ProgressSink).options(scheduling_strategy=here).remote()
        self.max_steps, self.interval_s, self.say = max_steps, interval_s, say
        self.last_step = 0
        self.closed = False  # stderr's reader went away: no more lines, the run stopped for it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="canine-progress", daemon=True)

    def poll(self) -> None:
        import ray

        for r in ray.get(self.sink.take.remote()):
            if self.closed:
                continue
            try:
                if "status" in r:
                    self.say(r["status"])
                elif r["step"] > self.last_step:
                    self.last_step = r["step"]
                    sys.stderr.write(console_line(r, self.max_steps) + "\n")
                    sys.stderr.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        """`canine pretrain ... 2>&1 | head`: the reader of the lines went away. The run stops as
        on Ctrl-C, a SIGINT to the main thread (run.py `_Interrupt`: the workers stopped, the last
        checkpoint kept for the same command), and ends quietly there (jobs/errors.py: 141), as a
        shell's writer into a closed pipe does, instead of training on unseen and then failing
        on its first line after fit()."""
        self.closed = True
        if threading.current_thread() is not threading.main_thread():
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        import ray

        self._stop.set()
        self._thread.join()
        self.poll()  # the records sent since the last look (actor calls from one caller run in order)
        ray.kill(self.sink)
