"""Beam's DaskRunner (apache_beam/runners/dask, Beam 2.77) with the gaps that break this job
filled in: `--runner DaskRunner` (pipeline/runners.py) resolves to `DaskRunner` here. The
class is built on first use (PEP 562 `__getattr__`), so importing this module costs no Beam or
Dask import. tests/pipeline/test_runners.py pins the Beam version these fixes were read from.
"""

import functools


def local_cluster(workers: int | None):
    """The cluster a DaskRunner run starts when given no --dask_client_address, and closes when
    it ends: worker processes of one thread each (the job's DoFns are pure Python; threads
    would share one GIL), everything on loopback. The scheduler's HTTP endpoint (a dashboard
    only if bokeh is installed) takes a free port: with None it still binds 8787, which a
    second cluster on the machine then cannot have."""
    from dask.distributed import LocalCluster

    return LocalCluster(n_workers=workers, processes=True, threads_per_worker=1, host="127.0.0.1",
                        dashboard_address="127.0.0.1:0")


def __getattr__(name):
    # PEP 562: Beam imports a runner by class path (getattr(module, "DaskRunner")); the class is
    # built on that first use, so importing this module costs no Beam or Dask import.
    if name == "DaskRunner":
        return runner_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- DaskRunner ----------------------------------------------------------------------------------
# Beam's DaskRunner runs a pipeline of one branch with one output. Run on this job it fails with
# "AttributeError: 'tuple' object has no attribute 'lang'" (split_of, in AssignSplit/KeySplit),
# and past that would not write most of the output. Its gaps, with the upstream lines (Beam 2.77):
#  1. Tagged outputs are mixed: transform_evaluator.ParDo returns `[v.value for v in
#     tagged_receivers.values]` (every tag in one bag) and the visitor keys bags by producing
#     transform, so `cleaned.kept` also held the (lang, outcome) tuples of `cleaned.outcomes`.
#     Here a ParDo's bag holds (tag, value) pairs and each output PCollection selects its tag.
#  2. Only one sink runs: run_pipeline computes `list(dask_visitor.bags.values())[-1]`, so of
#     shards.json, stats.json, _rejects/ and the tokenizer only the last built would be written.
#     Here every PCollection no transform reads is computed, in one graph (shared steps once).
#  3. A side input is computed inside each task that reads it (`list(self.bag)` in
#     DaskBagWindowedIterator): its whole upstream, the parsing included, again per task. Here
#     one task gathers it from its partitions' keys and Dask hands the list to every reader.
#  4. `result.metrics()` raises NotImplementedError. Here each bundle runs in a MetricsContainer,
#     as in the DirectRunner, and returns its counters with its outputs; the result adds them up.
#  5. Reshuffle is a no-op, so the work items (one partition of Create) were parsed by one task.
#     Here it splits the bag into one partition per worker thread, not more: every GroupByKey
#     after it is a task shuffle of that many partitions (4 per thread: 4,351 tasks and 3x the
#     time on the sample, 2 workers; 1 per thread: 848 tasks).
#  6. Outputs of finish_bundle were dropped (read before invoke_finish_bundle); here after it.
#  7. Transforms it has no translation for passed their input through silently; here they fail.
# Kept from upstream: its overrides (Create, Reshuffle, GroupByKey, Flatten) and its Create,
# GroupByKey (a Dask task shuffle keyed by tokenize, the same in every worker process) and
# Flatten translations. Batch only, global window only, as upstream. Everything the job writes
# is the same as on the DirectRunner (tests/pipeline/test_runners.py compares the shards).

_METRICS = ("metrics",)  # the tag of a bundle's counters: a tuple, never equal to a Beam tag (str or None)


def _run_bundle(spec, elements, side_values):
    """One Dask partition through one ParDo, as the DirectRunner runs a bundle (DoFnRunner: the
    same lifecycle calls, the same "[while running 'STEP']" on errors). -> [(tag, value), ...]
    and last (_METRICS, the bundle's MetricUpdates)."""
    from apache_beam.metrics.execution import MetricsContainer
    from apache_beam.pvalue import TaggedOutput
    from apache_beam.runners.common import DoFnRunner, DoFnState
    from apache_beam.runners.dask.transform_evaluator import OneReceiver, get_windowed_value
    from apache_beam.runners.worker import statesampler
    from apache_beam.transforms.sideinputs import SideInputMap
    from apache_beam.utils.counters import CounterFactory

    label, fn, windowing, args, kwargs, views = spec
    windowfn = windowing.windowfn
    side_inputs = [SideInputMap(view, options, [get_windowed_value(v, windowfn) for v in values])
                   for (view, options), values in zip(views, side_values)]
    receivers = OneReceiver()  # tag -> receiver; every output lands in receivers.values in order
    runner = DoFnRunner(fn, args, kwargs, side_inputs, windowing, tagged_receivers=receivers, step_name=label,
                        state=DoFnState(CounterFactory()))
    # Metrics.counter(...).inc() finds its container through the thread's state sampler.
    container = MetricsContainer(label)
    sampler = statesampler.StateSampler("", CounterFactory())
    previous = statesampler.get_current_tracker()
    statesampler.set_current_tracker(sampler)
    try:
        with sampler.scoped_state(label, "process", metrics_container=container):
            runner.setup()
            runner.start()
            for element in elements:
                runner.process(get_windowed_value(element, windowfn))
            runner.finish()
            runner.teardown()
    finally:
        statesampler.set_current_tracker(previous)
    out = [(v.tag, v.value.value) if isinstance(v, TaggedOutput) else (None, v.value) for v in receivers.values]
    out.append((_METRICS, container.get_cumulative()))
    return out


def _select(pairs, tag):
    return [value for t, value in pairs if t == tag]


def _nothing(partition):
    return []


def _concat(*partitions):
    return [value for partition in partitions for value in partition]


@functools.cache
def runner_class():
    """Build the DaskRunner class (and its options and result) on first use."""
    import dask
    import dask.bag as db
    import dask.distributed as ddist
    from apache_beam import pvalue
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.pipeline import PipelineVisitor
    from apache_beam.runners.dask import dask_runner, overrides
    from apache_beam.runners.dask import transform_evaluator as upstream
    from apache_beam.runners.direct.direct_metrics import DirectMetrics
    from apache_beam.runners.runner import PipelineResult, PipelineState
    from apache_beam.transforms.core import WindowInto
    from apache_beam.transforms.window import GlobalWindows

    class LocalClusterOptions(PipelineOptions):
        @classmethod
        def _add_argparse_args(cls, parser):
            parser.add_argument("--dask_local_workers", type=int, default=None,
                                help="Worker processes of the LocalCluster a run starts when given no "
                                     "--dask_client_address or --dask_scheduler_file (default: one per core).")

    class Translate(PipelineVisitor):
        """Each leaf transform -> a Dask bag per output PCollection."""

        def __init__(self, bag_kwargs, threads):
            self.bag_kwargs, self.threads = bag_kwargs, threads
            self.bags = {}  # PCollection -> bag of its elements
            self.read = set()  # PCollections some transform reads, as main or side input
            self.bundles = []  # each ParDo's bag of (tag, value) pairs: where its metrics are

        def visit_transform(self, node):
            transform, kind = node.transform, upstream.TRANSLATIONS.get(type(node.transform))
            main = [None if isinstance(pc, pvalue.PBegin) else self.bags[pc] for pc in node.inputs]
            self.read.update(node.inputs)
            self.read.update(si.pvalue for si in node.side_inputs)
            if kind is upstream.ParDo:
                pairs = self.pardo(node, main[0])
                self.bundles.append(pairs)
                for pc in node.outputs.values():
                    self.bags[pc] = pairs.map_partitions(_select, pc.tag)
                return
            if isinstance(transform, overrides._Reshuffle):
                bag = main[0].repartition(npartitions=max(main[0].npartitions, self.threads))
            elif kind is upstream.Flatten:
                bag = kind(node, bag_kwargs=self.bag_kwargs).apply(main)
            elif kind is not None:  # Create, GroupByKey
                bag = kind(node, bag_kwargs=self.bag_kwargs).apply(main[0] if main else None)
            elif isinstance(transform, overrides._GroupAlsoByWindow):
                bag = main[0]  # the GroupByKey before it grouped already (global window only)
            elif isinstance(transform, WindowInto) and isinstance(transform.windowing.windowfn, GlobalWindows):
                bag = main[0]  # values carry no window here: into the global one is a no-op (assert_that)
            else:
                raise NotImplementedError(f"DaskRunner has no translation for {node.full_label} "
                                          f"({type(transform).__module__}.{type(transform).__name__})")
            for pc in node.outputs.values():
                self.bags[pc] = bag

        def pardo(self, node, bag):
            transform = node.transform
            args, kwargs = transform.raw_side_inputs
            main_input = node.inputs[0]
            windowing = main_input.windowing
            views = [(type(si), si._view_options()) for si in node.side_inputs]
            # One task gathers each side input, once; map_partitions hands its result to every task.
            # From the partitions' own keys: a bag passed to dask.delayed whole is recomputed
            # under new keys (dask wraps it in ProhibitReuse), its upstream with it.
            side_values = [dask.delayed(_concat)(*self.bags[si.pvalue].to_delayed(optimize_graph=False))
                           for si in node.side_inputs]
            spec = (node.full_label, transform.fn, windowing, list(args), dict(kwargs), views)
            # The spec is bound, not passed: map_partitions would look inside its objects for collections.
            return bag.map_partitions(functools.partial(_run_bundle, spec), side_values,
                                      token=f"pardo-{node.full_label}")

        def graph(self):
            """One bag whose elements are the bundles' metrics and whose tasks include every
            output no transform reads (the sinks)."""
            unread = {id(bag): bag for pc, bag in self.bags.items() if pc not in self.read}
            parts = [pairs.map_partitions(_select, _METRICS) for pairs in self.bundles]
            parts += [bag.map_partitions(_nothing) for bag in unread.values()]
            return db.concat(parts) if parts else db.from_sequence([])

    class DaskRunnerResult(PipelineResult):
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
            # The client before the cluster, or it spends 30 s trying to reconnect.
            self._client.close()
            if self._cluster is not None:
                self._cluster.close()

    class DaskRunner(dask_runner.DaskRunner):
        """Beam's DaskRunner with the job's gaps filled (see above); starts a LocalCluster for the
        run when given no cluster."""

        def run_pipeline(self, pipeline, options):
            client_options = options.view_as(dask_runner.DaskOptions).get_all_options(drop_default=True,
                                                                                       current_only=True)
            # Upstream's default partition size, named so that it does not log a warning per Create.
            bag_kwargs = dask_runner.DaskOptions._extract_bag_kwargs(client_options) or {"partition_size": 128}
            cluster = None
            if not client_options.get("address") and not client_options.get("scheduler_file"):
                cluster = local_cluster(options.view_as(LocalClusterOptions).dask_local_workers)
                client_options["address"] = cluster.scheduler_address
            client = ddist.Client(**client_options)
            try:
                pipeline.replace_all(overrides.dask_overrides())
                translate = Translate(bag_kwargs, threads=sum(client.nthreads().values()) or 1)
                pipeline.visit(translate)
                future = client.compute(translate.graph())
            except BaseException:
                client.close()
                if cluster is not None:
                    cluster.close()
                raise
            return DaskRunnerResult(client, cluster, future)

    return DaskRunner
