"""The DirectRunner of `--workers 2` or more: what Beam's DirectRunner runs this job with (its
FnApiRunner in the multi_processing mode, worker processes started by a shell), with one change:
each worker process starts with SIGINT ignored. `--runner DirectRunner --workers N`, N > 1,
resolves to `DirectRunner` here (pipeline/beam/runners.py `beam_options`).

A terminal's Ctrl-C reaches the whole foreground process group, the workers included. The
launcher alone ends the job on it, and stops the workers (pipeline/run.py `_stop_sdk_workers`).
A worker ignored it once it had imported pipeline.beam.job, its Beam plugin (job.py
`set_up_worker_process`), but it spends a second or more importing apache_beam before that: a
Ctrl-C then printed a KeyboardInterrupt traceback per worker (36-92 lines, 2 workers, 5 of 5
tries, a user's report). Now the shell Beam starts a worker with ignores SIGINT (`trap '' INT`)
and execs Python, which inherits the ignored disposition and keeps it ("Python installs ... SIGINT
... if the parent process has not changed it", the signal module's documentation): ignored from
the worker's first instruction.

Importing this module imports Beam; pipeline/beam/runners.py names it only for such a run.
"""

from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.portability.portable_runner import JobServiceHandle

# Prepended to the worker's command line, which Beam runs with `sh -c` (local_job_service.py
# SubprocessSdkWorker.run: `subprocess.Popen(self._worker_command_line, shell=True, ...)`,
# Beam 2.77). `exec` leaves no shell between the launcher and the worker.
IGNORE_SIGINT = "trap '' INT; exec "


def worker_command(command: str) -> str:
    return command if command.startswith(IGNORE_SIGINT) else IGNORE_SIGINT + command


class _FnApiRunner(fn_runner.FnApiRunner):
    def run_via_runner_api(self, pipeline_proto, options):
        # FnApiRunner.run_pipeline (fn_runner.py, Beam 2.77) gives the multi_processing mode the
        # default environment SubprocessSDKEnvironment.from_command_string('PYTHON -m
        # apache_beam.runners.worker.sdk_worker_main'), whose payload is that command's bytes
        # (environments.py, registered with python_urns.SUBPROCESS_SDK and bytes), and then calls
        # this with the pipeline's proto. tests/pipeline/test_direct_runner.py checks both.
        for env in pipeline_proto.components.environments.values():
            if env.urn == python_urns.SUBPROCESS_SDK:
                env.payload = worker_command(env.payload.decode()).encode()
        return super().run_via_runner_api(pipeline_proto, options)


class DirectRunner(SwitchingDirectRunner):
    """Beam's DirectRunner (SwitchingDirectRunner) as it runs a batch job the FnApiRunner
    supports, which this job is: its FnApiRunner, given the pipeline options (with them the
    workers' --beam_plugins) as SwitchingDirectRunner.run_pipeline gives them (Beam 2.77)."""

    def run_pipeline(self, pipeline, options):
        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        provision_info = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
        return _FnApiRunner(provision_info=provision_info).run_pipeline(pipeline, options)
