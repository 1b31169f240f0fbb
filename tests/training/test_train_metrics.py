"""metrics.jsonl survives a crash: a torn last line never blocks resume, a corrupt earlier line is
an error naming the file and line, and a remote OUTPUT gets the file as one whole object."""

import json
import logging
import uuid

import fsspec
import pytest

from training.train import metrics


def _records(steps):
    return [{"step": s, "loss": 10.0 - s} for s in steps]


def _write(path, records, tail=""):
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)


def test_a_torn_last_line_is_dropped_with_a_warning(tmp_path, caplog):
    _write(tmp_path / metrics.METRICS_FILE, _records(range(1, 4)), tail='{"step": 4, "lo')
    with caplog.at_level(logging.WARNING, logger=metrics.__name__):
        assert metrics.read_metrics(str(tmp_path)) == _records(range(1, 4))
    assert "dropped its last line (4), torn by an interrupted write" in caplog.text


def test_a_corrupt_line_before_the_last_names_file_and_line(tmp_path):
    path = tmp_path / metrics.METRICS_FILE
    path.write_text('{"step": 1}\n\n{"step": 2, "lo\n{"step": 3}\n')
    with pytest.raises(ValueError, match=rf"{path}: line 3 is not a JSON record"):
        metrics.read_metrics(str(tmp_path))


def test_resume_after_a_torn_write_rewrites_a_clean_file(tmp_path):
    _write(tmp_path / metrics.METRICS_FILE, _records(range(1, 6)), tail='{"step": 6, "loss": 4.')
    log = metrics.MetricsLog(str(tmp_path), resume_step=4, tensorboard=False)  # checkpoint at step 4
    log.log({"step": 5, "loss": 0.5})
    log.close()
    assert (tmp_path / metrics.METRICS_FILE).read_text().splitlines()[-2:] == [
        json.dumps(_records([4])[0]), json.dumps({"step": 5, "loss": 0.5})]
    assert metrics.read_metrics(str(tmp_path)) == _records(range(1, 5)) + [{"step": 5, "loss": 0.5}]


def test_a_remote_output_gets_metrics_as_one_object_and_the_event_files(monkeypatch):
    url = f"memory://metrics-test-{uuid.uuid4().hex}/run"
    fs, root = fsspec.core.url_to_fs(url)
    piped, real = [], type(fs).pipe_file
    monkeypatch.setattr(type(fs), "pipe_file", lambda self, p, data, **kw: piped.append(p) or real(self, p, data, **kw))
    log = metrics.MetricsLog(url, resume_step=0, tensorboard=True)
    log.log({"step": 1, "loss": 2.0})
    log.sync()  # a checkpoint
    assert piped == [f"{root}/{metrics.METRICS_FILE}"]
    assert metrics.read_metrics(url) == [{"step": 1, "loss": 2.0}]
    log.log({"step": 2, "loss": 1.0})
    log.close()
    assert [r["step"] for r in metrics.read_metrics(url)] == [1, 2]
    found = [p[len(root) + 1:] for p in fs.find(root)]  # the event file went up too, not nested
    assert found[0] == metrics.METRICS_FILE and len(found) == 2
    assert found[1].startswith(f"{metrics.TENSORBOARD_DIR}/events.out.tfevents.")
