"""pipeline/beam/direct_runner.py: the DirectRunner of `--workers 2` starts its worker processes with
SIGINT ignored, and what that relies on in the pinned Beam. No worker is started here;
tests/jobs/test_preprocess_endings.py interrupts a real run as its workers start."""

import signal
import subprocess
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.portability import python_urns
from apache_beam.runners.portability.fn_api_runner import fn_runner
from google.protobuf import json_format

from pipeline.beam import direct_runner, runners


def test_a_worker_started_by_the_command_ignores_sigint_from_its_first_instruction():
    probe = f"{sys.executable} -c 'import signal; print(signal.getsignal(signal.SIGINT))'"
    out = subprocess.run(direct_runner.worker_command(probe), shell=True, capture_output=True, text=True, check=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)).stdout
    assert out.strip() == str(signal.SIG_IGN)
    assert direct_runner.worker_command(direct_runner.worker_command(probe)) == direct_runner.worker_command(probe)


def test_the_pinned_beams_worker_command_and_options_reach_the_workers(monkeypatch):
    """FnApiRunner.run_pipeline hands run_via_runner_api the proto whose subprocess environment's
    payload is the worker's command line, and the workers get the pipeline options (their
    --beam_plugins) from the provision info, as Beam's DirectRunner gives them (Beam 2.77)."""
    seen = {}

    def captured(self, proto, options):
        seen["commands"] = [env.payload.decode() for env in proto.components.environments.values()
                            if env.urn == python_urns.SUBPROCESS_SDK]
        seen["options"] = json_format.MessageToDict(self._provision_info.provision_info.pipeline_options)
        return "ran"

    monkeypatch.setattr(fn_runner.FnApiRunner, "run_via_runner_api", captured)
    options = runners.beam_options(2, "DirectRunner", ["--beam_plugins=pipeline.beam.job"])
    assert options.view_as(StandardOptions).runner == runners.DIRECT_PROCESSES
    assert runners.beam_options(1, "DirectRunner").view_as(StandardOptions).runner == "DirectRunner"  # in-process
    p = beam.Pipeline(options=options)
    _ = p | beam.Create([1]) | beam.Map(str)
    assert p.run() == "ran"
    assert seen["commands"] == [f"trap '' INT; exec {sys.executable} -m apache_beam.runners.worker.sdk_worker_main"]
    assert seen["options"]["beam:option:beam_plugins:v1"] == ["pipeline.beam.job"]
