"""metrics.jsonl survives a crash: a torn last line never blocks resume, a corrupt earlier line is
an error naming the file and line, and a remote OUTPUT gets the file as one whole object."""

import json
import logging
import uuid

import fsspec
import pytest

from training.train import rundir
from training.train import metrics


def _records(steps):
    return [{"step": s, "loss": 10.0 - s} for s in steps]


def _write(path, records, tail=""):
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)


def test_a_torn_last_line_is_dropped_with_a_warning(tmp_path, caplog):
    _write(tmp_path / rundir.METRICS, _records(range(1, 4)), tail='{"step": 4, "lo')
    with caplog.at_level(logging.WARNING, logger=rundir.__name__):
        assert rundir.read_metrics(str(tmp_path)) == _records(range(1, 4))
    assert "dropped its last line (4), torn by an interrupted write" in caplog.text


def test_a_corrupt_line_before_the_last_names_file_and_line(tmp_path):
    path = tmp_path / rundir.METRICS
    path.write_text('{"step": 1}\n\n{"step": 2, "lo\n{"step": 3}\n')
    with pytest.raises(ValueError, match=rf"{path}: line 3 is not a JSON record"):
        rundir.read_metrics(str(tmp_path))


def test_resume_after_a_torn_write_rewrites_a_clean_file(tmp_path):
    _write(tmp_path / rundir.METRICS, _records(range(1, 6)), tail='{"step": 6, "loss": 4.')
    log = metrics.MetricsLog(str(tmp_path), resume_step=4, tensorboard=False)  # checkpoint at step 4
    log.log({"step": 5, "loss": 0.5})
    log.close()
    assert (tmp_path / rundir.METRICS).read_text().splitlines()[-2:] == [
        json.dumps(_records([4])[0]), json.dumps({"step": 5, "loss": 0.5})]
    assert rundir.read_metrics(str(tmp_path)) == _records(range(1, 5)) + [{"step": 5, "loss": 0.5}]


def test_a_remote_output_gets_metrics_as_one_object_and_the_event_files(monkeypatch):
    url = f"memory://metrics-test-{uuid.uuid4().hex}/run"
    fs, root = fsspec.core.url_to_fs(url)
    piped, real = [], type(fs).pipe_file
    monkeypatch.setattr(type(fs), "pipe_file", lambda self, p, data, **kw: piped.append(p) or real(self, p, data, **kw))
    log = metrics.MetricsLog(url, resume_step=0, tensorboard=True)
    log.log({"step": 1, "loss": 2.0})
    log.sync()  # a checkpoint
    assert piped == [f"{root}/{rundir.METRICS}"]
    assert rundir.read_metrics(url) == [{"step": 1, "loss": 2.0}]
    log.log({"step": 2, "loss": 1.0})
    log.close()
    assert [r["step"] for r in rundir.read_metrics(url)] == [1, 2]
    found = [p[len(root) + 1:] for p in fs.find(root)]  # the event file went up too, not nested
    assert found[0] == rundir.METRICS and len(found) == 2
    assert found[1].startswith(f"{rundir.TENSORBOARD}/events.out.tfevents.")


def test_console_line_has_time_rate_and_eta():
    import time

    record = {"step": 40, "loss": 4.87, "accuracy": 0.054, "lr": 1.65e-3, "grad_norm": 0.56, "examples_per_s": 14.8,
              "chars_per_s": 7600.0, "data_wait_fraction": 0.03, "step_s": 0.5}
    now = time.mktime((2026, 11, 23, 9, 41, 33, 0, 0, -1))
    line = metrics.console_line(record, 200, now=now)
    assert line.startswith("2026-11-23 09:41:33  step  40/200  loss 4.8700")
    assert "2.00 steps/s" in line and line.endswith("ETA 1:20")  # 160 steps left at 2 per second
    eval_line = metrics.console_line({**record, "eval_loss": 4.2, "eval_accuracy": 0.07}, 200, now=now, steps_per_s=0.01)
    assert "ETA 4:26:40" in eval_line and eval_line.endswith("| eval loss 4.2000 acc 0.070")
    last = metrics.console_line({**record, "step": 200}, 200, now=now)
    assert "ETA" not in last and "steps/s" in last
    assert " - " in metrics.console_line({k: v for k, v in record.items() if k != "step_s"}, 200, now=now)
    sop = metrics.console_line({**record, "sop_accuracy": 0.5, "eval_loss": 4.2, "eval_accuracy": 0.07,
                                "eval_sop_accuracy": 0.625}, 200, now=now)
    assert "acc 0.054  lr" in line and "sop acc 0.500" in sop and sop.endswith("| eval loss 4.2000 acc 0.070 sop acc 0.625")


def test_a_closed_stderr_stops_the_run_as_ctrl_c_would(monkeypatch, sigint_raises):
    """`canine pretrain ... 2>&1 | head -1`: the progress thread's line meets the closed pipe; the
    main thread, waiting in fit(), gets the SIGINT a Ctrl-C sends (run.py stops the workers, keeps
    the checkpoint; the CLI ends quietly, 141), and no line is tried again."""
    import errno
    import threading
    import time
    import types

    import ray

    class Closed:
        def write(self, text):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

        def flush(self):
            pass

    record = {"loss": 4.87, "accuracy": 0.054, "lr": 1.65e-3, "grad_norm": 0.56, "examples_per_s": 14.8,
              "chars_per_s": 7600.0, "data_wait_fraction": 0.03, "step_s": 0.5}
    records = [{**record, "step": 1}, {**record, "step": 2}]
    printer = metrics.ProgressPrinter.__new__(metrics.ProgressPrinter)  # no Ray actor: its sink, by hand
    printer.sink = types.SimpleNamespace(take=types.SimpleNamespace(remote=lambda: list(records)))
    printer.max_steps, printer.last_step, printer.closed = 2, 0, False
    monkeypatch.setattr(ray, "get", lambda refs: refs)
    monkeypatch.setattr(metrics.sys, "stderr", Closed())
    with pytest.raises(KeyboardInterrupt):
        threading.Thread(target=printer.poll).start()
        time.sleep(30)  # fit()'s wait, which the SIGINT interrupts
    assert printer.closed and printer.last_step == 1
    printer.poll()  # the main thread's last look (ProgressPrinter.__exit__): nothing raised, nothing tried
