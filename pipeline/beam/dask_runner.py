"""Beam's DaskRunner (apache_beam/runners/dask, Beam 2.77) with the gaps that break this job
filled in: `--runner DaskRunner` (pipeline/beam/runners.py) resolves to `DaskRunner` here.

Upstream runs a pipeline of one branch with one output. On this job it fails with
"AttributeError: 'tuple' object has no attribute 'lang'" (split_of, in what was AssignSplit/KeySplit) and,
past that, would not write most of the output. Each gap is filled by one piece below, marked
"Gap N" with the upstream code it replaces:

  1. tagged outputs share one bag               _tagged, _select
  2. only the last bag built is computed         Translate.graph
  3. a side input is recomputed per reader       _gathered
  4. result.metrics() is not implemented         _metered, DaskRunnerResult
  5. Reshuffle is a no-op                        _reshuffle
  6. finish_bundle's outputs are dropped         _process_bundle
  7. untranslated transforms pass through        _is_identity

Kept from upstream: its overrides (overrides.dask_overrides: Create, Reshuffle, GroupByKey,
Flatten) and its Create, GroupByKey (a Dask task shuffle keyed by tokenize, the same in every
worker process) and Flatten translations. Batch only, global window only, as upstream. Everything
the job writes is the same as on the DirectRunner (tests/pipeline/test_runners.py compares the
shards, and pins the Beam version these gaps were read from).

Importing this module imports Beam and Dask. Only pipeline/beam/runners.py imports it, when a run
asks for the DaskRunner, so DirectRunner runs and `canine inspect` never load Dask.
"""

import contextlib
import functools
import logging
import re
import signal
import threading

import dask
import dask.bag as db
import dask.distributed as ddist
from apache_beam import pvalue
from apache_beam.metrics.execution import MetricsContainer
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.pipeline import PipelineVisitor
from apache_beam.runners.common import DoFnRunner, DoFnState
from apache_beam.runners.dask import dask_runner as upstream_runner
from apache_beam.runners.dask import overrides
from apache_beam.runners.dask import transform_evaluator as evaluator
from apache_beam.runners.direct.direct_metrics import DirectMetrics
from apache_beam.runners.runner import PipelineResult, PipelineState
from apache_beam.runners.worker import statesampler
from apache_beam.transforms.core import WindowInto
from apache_beam.transforms.sideinputs import SideInputMap
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.counters import CounterFactory

# dask.distributed logs its scheduler's and nannies' lives at INFO ("State start", "Register worker",
# "Nanny asking worker to close", ...): ~30 lines a run, printed by the root logger's handler
# when there is one (`canine preprocess` sets one, and distributed then adds none of its own, so
# LocalCluster's silence_logs does not reach them). WARNING and above still show; a level given
# in Dask's config (DASK_LOGGING__DISTRIBUTED=info) wins.
if "distributed" not in (dask.config.get("logging", default=None) or {}):
    logging.getLogger("distributed").setLevel(logging.WARNING)


def local_cluster(workers: int | None):
    """The cluster a DaskRunner run starts when given no --dask_client_address, and closes when
    it ends: worker processes of one thread each (the job's DoFns are pure Python; threads
    would share one GIL), everything on loopback. The scheduler's HTTP endpoint (a dashboard
    only if bokeh is installed) takes a free port: with None it still binds 8787, which a
    second cluster on the machine then cannot have."""
    from dask.distributed import LocalCluster

    return LocalCluster(n_workers=workers, processes=True, threads_per_worker=1, host="127.0.0.1",
                        dashboard_address="127.0.0.1:0")


def _not_a_step_failure(record: logging.LogRecord) -> bool:
    """Beam's DoFnRunner logs a step's exception ("... [while running 'STEP']") before raising it."""
    return not _STEP_FAILURE.search(record.getMessage())


def _not_a_failed_task(record: logging.LogRecord) -> bool:
    """distributed's worker logs a task's exception ("Compute Failed", key, task, traceback)."""
    return not record.getMessage().startswith("Compute Failed")


def _not_a_cancelled_task(record: logging.LogRecord) -> bool:
    """distributed's worker warns of each task that was running when the run was cancelled (Ctrl-C)."""
    return not ("Async instruction for" in record.getMessage() and "Task cancelled" in record.getMessage())


_STEP_FAILURE = re.compile(r"\[while running '[^']*'\]$")


class LocalWorkerSetup(ddist.WorkerPlugin):
    """The worker processes of the run's LocalCluster share the launcher's terminal. There:
    - Ctrl-C is ignored: it reaches the whole process group, and each worker's event loop would
      end with a KeyboardInterrupt traceback; the launcher alone ends the run on it, and closes
      the workers (DaskRunnerResult.wait_until_finish);
    - no record of a step's failure, which the run raises to the launcher and `canine
      preprocess` reports in one line: without a handler of their own, Beam's record would print
      with its traceback through Python's last-resort handler, and distributed's "Compute Failed"
      with the task's; nor of each task cancelled by Ctrl-C.
    A cluster given by address keeps its workers as they are."""

    name = "canine-local-worker-setup"

    def setup(self, worker):
        if threading.current_thread() is threading.main_thread():  # a worker's event loop runs there
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        logging.getLogger("apache_beam.runners.common").addFilter(_not_a_step_failure)
        logging.getLogger("distributed.worker").addFilter(_not_a_failed_task)
        logging.getLogger("distributed.worker.state_machine").addFilter(_not_a_cancelled_task)
        logging.getLogger("distributed.worker").addFilter(_HeartbeatWhileClosing(worker))


class _HeartbeatWhileClosing(logging.Filter):
    """A heartbeat in flight when the run closes its worker fails on the closed connection
    ("Failed to communicate with scheduler during heartbeat" with a StreamClosedError traceback,
    seen on a loaded machine): the worker is going away as asked, so that record says nothing.
    Nor does one whose connection attempt was cancelled (asyncio's CancelledError behind it): the
    scheduler closed first, as LocalCluster.close may on a loaded machine (2 of ~30 runs at load
    20 here), and a worker that really lost its scheduler fails its tasks, which the run reports.
    Any other heartbeat failure of a running worker still shows."""

    def __init__(self, worker):
        super().__init__()
        self.worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        from distributed.core import Status

        closing = (Status.closing, Status.closing_gracefully, Status.closed, Status.stopping, Status.stopped)
        if "during heartbeat" not in record.getMessage():
            return True
        return not (self.worker.status in closing or _cancelled(record.exc_info))


def _cancelled(exc_info) -> bool:
    """Whether an asyncio.CancelledError is the exception or among its causes."""
    import asyncio

    e, seen = exc_info[1] if exc_info else None, set()
    while e is not None and id(e) not in seen:
        if isinstance(e, asyncio.CancelledError):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


class LocalClusterOptions(PipelineOptions):
    """--dask_local_workers. Defined on import: Beam's option parser reads every PipelineOptions
    subclass there is, so pipeline/beam/runners.py imports this module before parsing."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--dask_local_workers", type=int, default=None,
                            help="Worker processes of the LocalCluster a run starts when given no "
                                 "--dask_client_address or --dask_scheduler_file (default: one per core).")


# --- one bundle: replaces transform_evaluator.apply_dofn_to_bundle ------------------------------

_METRICS = ("metrics",)  # the tag of a bundle's counters: a tuple, never equal to a Beam tag (str or None)


def _run_bundle(spec, elements, side_values):
    """One Dask partition through one ParDo. -> [(tag, value), ...] and last (_METRICS, the
    bundle's MetricUpdates). Runs the DoFn through DoFnRunner, as the DirectRunner does: the same
    lifecycle calls, the same "[while running 'STEP']" on errors."""
    label, fn, windowing, args, kwargs, views = spec
    side_inputs = [_side_input(view, options, values, windowing.windowfn)
                   for (view, options), values in zip(views, side_values)]
    receivers = evaluator.OneReceiver()  # tag -> receiver; every output lands in receivers.values
    runner = DoFnRunner(fn, args, kwargs, side_inputs, windowing, tagged_receivers=receivers,
                        step_name=label, state=DoFnState(CounterFactory()))
    with _metered(label) as container:
        outputs = _process_bundle(runner, receivers, elements, windowing.windowfn)
    return _tagged(outputs) + [(_METRICS, container.get_cumulative())]


def _process_bundle(runner, receivers, elements, windowfn):
    """Gap 6. transform_evaluator.apply_dofn_to_bundle reads `tagged_receivers.values` before
    `invoke_finish_bundle`, dropping what finish_bundle outputs; here they are read after it."""
    runner.setup()
    runner.start()
    for element in elements:
        runner.process(evaluator.get_windowed_value(element, windowfn))
    runner.finish()
    runner.teardown()
    return receivers.values


def _tagged(outputs):
    """Gap 1, in the bundle. transform_evaluator.apply_dofn_to_bundle returns
    `[v.value for v in tagged_receivers.values]`: the outputs of every tag in one list, tags lost.
    Here each output is a (tag, value) pair; the main output's tag is None."""
    return [(v.tag, v.value.value) if isinstance(v, pvalue.TaggedOutput) else (None, v.value) for v in outputs]


def _select(pairs, tag):
    """Gap 1, in the graph. DaskRunner.to_dask_bag_visitor keys bags by producing transform
    (`self.bags[transform_node]`), so every output of a ParDo read the same bag: `cleaned.kept`
    also held the Outcome records of `cleaned.outcomes`. Here each output PCollection's
    bag keeps the values of its own tag."""
    return [value for t, value in pairs if t == tag]


@contextlib.contextmanager
def _metered(label):
    """Gap 4, in the bundle. Upstream collects no counters (DaskRunnerResult.metrics raises
    NotImplementedError). Here a bundle runs in its own MetricsContainer, as in the DirectRunner:
    Metrics.counter(...).inc() finds it through the thread's state sampler."""
    container = MetricsContainer(label)
    sampler = statesampler.StateSampler("", CounterFactory())
    previous = statesampler.get_current_tracker()
    statesampler.set_current_tracker(sampler)
    try:
        with sampler.scoped_state(label, "process", metrics_container=container):
            yield container
    finally:
        statesampler.set_current_tracker(previous)


def _side_input(view, options, values, windowfn):
    """A side input read from the list _gathered computed (gap 3)."""
    return SideInputMap(view, options, [evaluator.get_windowed_value(v, windowfn) for v in values])


# --- the graph: replaces DaskRunner.to_dask_bag_visitor ------------------------------------------

def _gathered(bag):
    """Gap 3. transform_evaluator.DaskBagWindowedIterator.__iter__ runs `list(self.bag)` inside
    each task that reads the side input: its whole upstream, the parsing included, again per task.
    Here one task gathers it, once, and Dask hands the list to every reader. It reads the
    partitions by their own keys: a bag passed to dask.delayed whole is recomputed under new keys
    (dask wraps it in ProhibitReuse), its upstream with it."""
    return dask.delayed(_concat)(*bag.to_delayed(optimize_graph=False))


def _reshuffle(bag, threads):
    """Gap 5. overrides._Reshuffle has no entry in transform_evaluator.TRANSLATIONS, so upstream
    passes it through: the work items (one partition of Create) were all parsed by one task. Here
    it splits the bag into one partition per worker thread, not more: every GroupByKey after it is
    a task shuffle of that many partitions (4 per thread: 4,351 tasks and 3x the time on the
    sample, 2 workers; 1 per thread: 848 tasks)."""
    return bag.repartition(npartitions=max(bag.npartitions, threads))


def _is_identity(transform):
    """Gap 7. DaskRunner.to_dask_bag_visitor looks translations up with
    `TRANSLATIONS.get(..., NoOp)`: a transform it cannot run passes its input through, silently.
    Here only these do, and any other transform without a translation fails the run:
    overrides._GroupAlsoByWindow (the GroupByKey before it grouped already; global window only),
    and WindowInto the global window (values carry no window here; assert_that applies it)."""
    return isinstance(transform, overrides._GroupAlsoByWindow) or (
        isinstance(transform, WindowInto) and isinstance(transform.windowing.windowfn, GlobalWindows))


def _nothing(partition):
    return []


def _concat(*partitions):
    return [value for partition in partitions for value in partition]


class Translate(PipelineVisitor):
    """Each leaf transform -> a Dask bag per output PCollection."""

    def __init__(self, bag_kwargs, threads):
        self.bag_kwargs, self.threads = bag_kwargs, threads
        self.bags = {}  # PCollection -> bag of its elements
        self.read = set()  # PCollections some transform reads, as main or side input
        self.bundles = []  # each ParDo's bag of (tag, value) pairs: where its metrics are

    def visit_transform(self, node):
        inputs = [None if isinstance(pc, pvalue.PBegin) else self.bags[pc] for pc in node.inputs]
        self.read.update(node.inputs)
        self.read.update(si.pvalue for si in node.side_inputs)
        if evaluator.TRANSLATIONS.get(type(node.transform)) is evaluator.ParDo:
            pairs = self.pardo(node, inputs[0])
            self.bundles.append(pairs)
            for pc in node.outputs.values():
                self.bags[pc] = pairs.map_partitions(_select, pc.tag)
        else:
            bag = self.translate(node, inputs)
            for pc in node.outputs.values():
                self.bags[pc] = bag

    def translate(self, node, inputs):
        """A transform other than ParDo -> the bag of its output(s)."""
        transform = node.transform
        kind = evaluator.TRANSLATIONS.get(type(transform))
        if isinstance(transform, overrides._Reshuffle):
            return _reshuffle(inputs[0], self.threads)
        if kind is evaluator.Flatten:
            return kind(node, bag_kwargs=self.bag_kwargs).apply(inputs)
        if kind is not None:  # Create, GroupByKey
            return kind(node, bag_kwargs=self.bag_kwargs).apply(inputs[0] if inputs else None)
        if _is_identity(transform):
            return inputs[0]
        raise NotImplementedError(f"DaskRunner has no translation for {node.full_label} "
                                  f"({type(transform).__module__}.{type(transform).__name__})")

    def pardo(self, node, bag):
        """A ParDo -> its bag of (tag, value) pairs (gap 1), computed by _run_bundle."""
        transform = node.transform
        args, kwargs = transform.raw_side_inputs
        views = [(type(si), si._view_options()) for si in node.side_inputs]
        side_values = [_gathered(self.bags[si.pvalue]) for si in node.side_inputs]
        spec = (node.full_label, transform.fn, node.inputs[0].windowing, list(args), dict(kwargs), views)
        # The spec is bound, not passed: map_partitions would look inside its objects for collections.
        return bag.map_partitions(functools.partial(_run_bundle, spec), side_values,
                                  token=f"pardo-{node.full_label}")

    def graph(self):
        """Gap 2. DaskRunner.run_pipeline computes `list(dask_visitor.bags.values())[-1]`, the last
        bag built: of shards.json, stats.json, _rejects/ and the tokenizer only one would be
        written. Here one bag whose tasks include every output no transform reads (the sinks), in
        one graph (shared steps once), and whose elements are the bundles' metrics (gap 4)."""
        unread = {id(bag): bag for pc, bag in self.bags.items() if pc not in self.read}
        parts = [pairs.map_partitions(_select, _METRICS) for pairs in self.bundles]
        parts += [bag.map_partitions(_nothing) for bag in unread.values()]
        return db.concat(parts) if parts else db.from_sequence([])


# --- the run: replaces dask_runner.DaskRunner.run_pipeline and DaskRunnerResult -----------------

class DaskRunnerResult(PipelineResult):
    """Gap 4, in the result. dask_runner.DaskRunnerResult.metrics raises NotImplementedError; here
    the bundles' counters (the elements of Translate.graph) are added up, as the DirectRunner
    does. Also closes the client, and the cluster the run started, when the run ends (upstream
    leaves its client open)."""

    def __init__(self, client, cluster, future):
        super().__init__(PipelineState.RUNNING)
        self._client, self._cluster, self._future = client, cluster, future
        self._metrics = DirectMetrics()

    def wait_until_finish(self, duration=None):
        if self._state != PipelineState.RUNNING:
            return self._state
        if duration is not None:  # milliseconds, as in Beam
            try:
                ddist.wait(self._future, timeout=duration / 1000)
            except TimeoutError:
                return self._state
        try:
            updates = self._future.result()
        except KeyboardInterrupt:  # Ctrl-C: the workers' running tasks are not waited for
            self._state = PipelineState.CANCELLED
            self._future.cancel()
            _close(self._client, self._cluster, interrupted=True)
            raise
        except BaseException:  # a DoFn's own exception, "[while running 'STEP']" appended
            self._state = PipelineState.FAILED
            self._close()
            raise
        for bundle, update in enumerate(updates):
            self._metrics.commit_physical(bundle, update)
            self._metrics.commit_logical(bundle, update)
        self._state = PipelineState.DONE
        self._close()
        return self._state

    def cancel(self):
        if self._state == PipelineState.RUNNING:
            self._future.cancel()
            self._state = PipelineState.CANCELLED
            self._close()
        return self._state

    def metrics(self):
        return self._metrics

    def _close(self):
        _close(self._client, self._cluster)


# How long a worker process of the run's LocalCluster may take to exit. Closed by the cluster, a
# nanny gives it 4 s, then kills it with a warning; this job's workers need about that: tearing down
# an interpreter that imported Beam takes 1.4 s on an idle core of the test machine, and a
# loaded machine doubles it.
WORKER_EXIT_S = 30


async def _close_workers(cluster, timeout: float):
    import asyncio

    await asyncio.gather(*(nanny.close(timeout=timeout) for nanny in list(cluster.workers.values())))


def _no_kill_warning(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Worker process still alive after")


# After Ctrl-C: the task a worker runs (a work item, cached whole or not at all) is not waited
# for; the worker is killed after this long, without the nanny's warning.
INTERRUPTED_EXIT_S = 1


def _close(client, cluster, interrupted: bool = False):
    """Close the client, then the cluster the run started (the other way round, the client
    spends 30 s trying to reconnect)."""
    client.close()
    if cluster is None:
        return
    if interrupted:
        nanny = logging.getLogger("distributed.nanny")
        nanny.addFilter(_no_kill_warning)
        try:
            cluster.sync(_close_workers, cluster, INTERRUPTED_EXIT_S)
        finally:
            nanny.removeFilter(_no_kill_warning)
    else:
        cluster.sync(_close_workers, cluster, WORKER_EXIT_S)
    cluster.close()


class DaskRunner(upstream_runner.DaskRunner):
    """Beam's DaskRunner with the job's gaps filled (see above); starts a LocalCluster for the
    run when given no cluster."""

    def run_pipeline(self, pipeline, options):
        client_options = options.view_as(upstream_runner.DaskOptions).get_all_options(drop_default=True,
                                                                                      current_only=True)
        # Upstream's default partition size, named so that it does not log a warning per Create.
        bag_kwargs = upstream_runner.DaskOptions._extract_bag_kwargs(client_options) or {"partition_size": 128}
        cluster = None
        if not client_options.get("address") and not client_options.get("scheduler_file"):
            cluster = local_cluster(options.view_as(LocalClusterOptions).dask_local_workers)
            client_options["address"] = cluster.scheduler_address
        client = ddist.Client(**client_options)
        try:
            if cluster is not None:
                client.register_plugin(LocalWorkerSetup())
            pipeline.replace_all(overrides.dask_overrides())
            translate = Translate(bag_kwargs, threads=sum(client.nthreads().values()) or 1)
            pipeline.visit(translate)
            future = client.compute(translate.graph())
        except BaseException:
            _close(client, cluster)
            raise
        return DaskRunnerResult(client, cluster, future)
