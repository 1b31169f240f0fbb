"""infra/ agrees with itself and with the code: every YAML/JSON parses; image names, versions,
entry points, config names, secret names, DeepSpeed keys and Beam options match what the code and
pyproject.toml say; the dashboard stays inside the cluster; secrets come only from Kubernetes."""

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from jobs import cli

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Every pinned requirement, the base install's and the extras' (not the extras' references to each other).
PINS = dict(re.match(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(.+)", d).groups()
            for d in PYPROJECT["project"]["dependencies"] + sum(PYPROJECT["project"]["optional-dependencies"].values(), [])
            if "==" in d)
SECRETS = {"canine-ray-token", "canine-gcp-credentials"}


def _docs(path):
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _manifests():
    return {p.name: _docs(p) for p in sorted((INFRA / "k8s").glob("*.yaml"))}


def _one(kind):
    found = [d for docs in _manifests().values() for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def _walk(node, path=()):
    """Every (path, node) of a parsed YAML tree, the root included."""
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, path + (i,))


def _containers(doc):
    return [c for path, node in _walk(doc) if path and path[-1] == "containers" for c in node]


def _built_images():
    """Image name per Dockerfile, from its documented `docker build ... -t NAME .` line."""
    out = {}
    for dockerfile in sorted((INFRA / "docker").glob("*.Dockerfile")):
        m = re.search(rf"docker build -f infra/docker/{re.escape(dockerfile.name)} -t (\S+) \.", dockerfile.read_text())
        assert m, f"{dockerfile}: no documented build line"
        out[dockerfile.stem] = m.group(1)
    return out


def _flags(name):
    lines = (INFRA / "beam" / name).read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


# --- everything parses ---------------------------------------------------------------------------


def test_every_yaml_and_json_in_infra_parses():
    yamls = sorted(INFRA.rglob("*.yaml"))
    assert len(yamls) >= 5
    for path in yamls:
        for doc in _docs(path):
            assert isinstance(doc, dict) and ("kind" in doc or "resources" in doc), path
    for path in sorted(INFRA.rglob("*.json")):
        assert isinstance(json.loads(path.read_text()), dict), path
    assert subprocess.run(["bash", "-n", str(INFRA / "schedule" / "preprocess-languages.sh")]).returncode == 0


def test_kustomization_references_existing_files():
    kust = yaml.safe_load((INFRA / "kustomization.yaml").read_text())
    for rel in kust["resources"] + [f for g in kust["configMapGenerator"] for f in g["files"]]:
        assert (INFRA / rel).is_file(), rel
    namespaced = [d for docs in _manifests().values() for d in docs if d["kind"] != "Namespace"]
    assert {d["metadata"]["namespace"] for d in namespaced} == {kust["namespace"]}


# --- images and versions -------------------------------------------------------------------------


def test_images_are_the_built_ones_tagged_with_the_project_version():
    built = _built_images()
    assert set(built) == {"gpu", "beam"}
    for name in built.values():
        assert name.endswith(":" + PYPROJECT["project"]["version"]), name
    used = {c["image"] for docs in _manifests().values() for d in docs for c in _containers(d)}
    assert used == set(built.values())
    cluster = _one("RayCluster")
    assert {c["image"] for c in _containers(cluster)} == {built["gpu"]}  # head and workers: one image
    assert {c["image"] for c in _containers(_one("CronJob"))} == {built["beam"]}
    assert f"--sdk_container_image={built['beam']}" in _flags("dataflow.flags")


def test_dockerfiles_install_the_pinned_stack():
    gpu = (INFRA / "docker" / "gpu.Dockerfile").read_text()
    beam = (INFRA / "docker" / "beam.Dockerfile").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for pkg in ("torch", "deepspeed"):  # the training image: the Makefile's order and pins
        assert f"{pkg}=={PINS[pkg]}" in gpu, pkg
    for pin in re.findall(r"(ninja==\S+|numpy==\S+)", makefile):
        assert pin in gpu
    assert "pip install '/opt/canine[train,hf]'" in gpu
    # The Beam image, on every Dataflow worker: the preprocessing install only.
    installs = [line for line in beam.splitlines() if "pip install" in line and not line.lstrip().startswith("#")]
    assert installs == ["RUN pip install /opt/canine \\"], installs
    assert not re.search(r"\b(torch|deepspeed|ray)==", beam)
    for text in (gpu, beam):
        assert "COPY . /opt/canine" in text and "WORKDIR /opt/canine" in text
    py = re.search(r">=(\d+\.\d+)", PYPROJECT["project"]["requires-python"]).group(1)
    assert f"python{py}" in gpu and f"beam_python{py}_sdk" in beam
    assert re.search(rf"ARG BEAM_VERSION={re.escape(PINS['apache-beam'])}\n", beam)
    assert _one("RayCluster")["spec"]["rayVersion"] == PINS["ray"]


def _from_images(dockerfile: Path) -> list[str]:
    """The images a Dockerfile starts from, with its ARG defaults filled in."""
    args, images = {}, []
    for line in dockerfile.read_text().splitlines():
        if m := re.match(r"ARG (\w+)=(\S+)", line):
            args[m.group(1)] = re.sub(r"\$\{(\w+)\}", lambda v: args[v.group(1)], m.group(2))
        elif m := re.match(r"FROM (\S+)", line):
            images.append(re.sub(r"\$\{(\w+)\}", lambda v: args[v.group(1)], m.group(1)))
    return images


def _pinned(image: str) -> bool:
    """By digest, or by a tag that is an exact version (x.y.z), never `latest` or a bare name."""
    if "@sha256:" in image:
        return True
    tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else ""
    return bool(re.search(r"\d+\.\d+\.\d+", tag)) and "latest" not in tag


def test_every_image_is_pinned_by_digest_or_exact_version():
    used = [i for d in sorted((INFRA / "docker").glob("*.Dockerfile")) for i in _from_images(d)]
    assert used == [f"apache/beam_python3.11_sdk:{PINS['apache-beam']}", "nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04"]
    used += [c["image"] for docs in _manifests().values() for d in docs for c in _containers(d)]
    used += [f.split("=", 1)[1] for f in _flags("dataflow.flags") if f.startswith("--sdk_container_image=")]
    for image in used:
        assert _pinned(image), image
    assert not _pinned("apache/beam_python3.11_sdk") and not _pinned("ghcr.io/x/y:latest") and not _pinned("x:12")


def test_cluster_prerequisites_are_documented_with_exact_versions():
    doc = (ROOT / "docs" / "cluster.md").read_text()
    section = doc.split("## Prerequisites on the cluster\n", 1)[1].split("\n## ", 1)[0]
    assert doc.index("## Prerequisites on the cluster") < doc.index("## The Ray cluster")
    assert re.search(r"helm install kuberay-operator kuberay/kuberay-operator --version \d+\.\d+\.\d+", section)
    assert re.search(r"nvdp/nvidia-device-plugin .*--version \d+\.\d+\.\d+", section)
    assert "nvidia.com/gpu" in section and "infra/docker/release.sh" in section


DOCKER_STANDIN = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$CALLS"
if [ "$1 $2" = "manifest inspect" ]; then exit "${EXISTS:-1}"; fi
"""


def test_release_pushes_each_version_once(tmp_path):
    """infra/docker/release.sh with a recording stand-in for docker, in a copy of the repository."""
    repo = tmp_path / "repo"
    (repo / "infra" / "docker").mkdir(parents=True)
    for rel in ("pyproject.toml", "infra/docker/gpu.Dockerfile", "infra/docker/beam.Dockerfile", "infra/docker/release.sh"):
        (repo / rel).write_bytes((ROOT / rel).read_bytes())
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "release"]):
        subprocess.run(git + cmd, cwd=repo, check=True, capture_output=True)
    standin, calls = tmp_path / "docker", tmp_path / "calls"
    standin.write_text(DOCKER_STANDIN)
    standin.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "DOCKER": str(standin), "CALLS": str(calls)}

    def release(**extra):
        return subprocess.run(["bash", str(repo / "infra" / "docker" / "release.sh")], cwd=tmp_path,
                              env={**env, **extra}, capture_output=True, text=True, timeout=60)

    built = _built_images()
    r = release(EXISTS="0")  # the registry has the tag already
    assert r.returncode == 2 and "is already in the registry; a tag is never reused" in r.stderr
    assert all(c.startswith("manifest inspect") for c in calls.read_text().splitlines())
    calls.unlink()
    r = release()
    assert r.returncode == 0, r.stderr
    lines = calls.read_text().splitlines()
    assert [c.split()[0] for c in lines] == ["manifest", "manifest", "build", "push", "build", "push"]
    assert lines[3] == f"push {built['gpu']}" and lines[5] == f"push {built['beam']}"
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert f"org.opencontainers.image.revision={commit}" in lines[2]
    (repo / "pyproject.toml").write_text((repo / "pyproject.toml").read_text() + "\n# an uncommitted change\n")
    r = release()
    assert r.returncode == 2 and "uncommitted changes" in r.stderr


# --- secrets and exposure --------------------------------------------------------------------------


def test_secrets_come_from_kubernetes_and_are_documented():
    referenced = set()
    for docs in _manifests().values():
        for doc in docs:
            assert doc["kind"] != "Secret", "secrets are created with kubectl, never stored in the repo"
            for path, value in _walk(doc):
                if path[-2:] in (("secretKeyRef", "name"), ("secret", "secretName"), ("authOptions", "secretName")):
                    referenced.add(value)
            for c in _containers(doc):
                for e in c.get("env", []):
                    if re.search(r"TOKEN|PASSWORD|SECRET|_KEY$", e["name"]):
                        assert "value" not in e, f"{e['name']} must come from a secret"
    assert referenced == SECRETS
    cluster_md = (ROOT / "docs" / "cluster.md").read_text()
    for name in SECRETS:
        assert re.search(rf"kubectl -n canine create secret generic {name} ", cluster_md), name
    everything = "\n".join(p.read_text() for p in INFRA.rglob("*") if p.is_file())
    assert "PRIVATE KEY" not in everything and '"private_key"' not in everything


def test_token_auth_is_on_and_the_dashboard_stays_inside():
    cluster = _one("RayCluster")
    assert cluster["spec"]["authOptions"] == {"mode": "token", "secretName": "canine-ray-token"}
    assert cluster["spec"]["headGroupSpec"].get("serviceType", "ClusterIP") == "ClusterIP"
    for docs in _manifests().values():
        for doc in docs:
            assert doc["kind"] not in ("Ingress", "Route", "Gateway", "HTTPRoute")
            assert not (doc["kind"] == "Service" and doc["spec"].get("type") in ("LoadBalancer", "NodePort"))
            assert not any(path[-1:] == ("enableIngress",) and value for path, value in _walk(doc))


def test_cluster_has_a_cpu_head_and_gpu_workers():
    spec = _one("RayCluster")["spec"]
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"
    assert "nvidia.com/gpu" not in json.dumps(head)
    (group,) = spec["workerGroupSpecs"]
    (worker,) = group["template"]["spec"]["containers"]
    assert int(worker["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    assert worker["resources"]["requests"] == worker["resources"]["limits"]  # guaranteed QoS
    assert any(v["name"] == "dshm" and v["emptyDir"]["medium"] == "Memory" for v in group["template"]["spec"]["volumes"])


# --- the RayJob and the pretraining configs ----------------------------------------------------------


def test_rayjob_runs_canine_pretrain_on_our_cluster():
    job, cluster = _one("RayJob"), _one("RayCluster")
    assert job["spec"]["clusterSelector"] == {"ray.io/cluster": cluster["metadata"]["name"]}
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[0] in PYPROJECT["project"]["scripts"] and PYPROJECT["project"]["scripts"][argv[0]] == "jobs.cli:main"
    assert argv[1] == "pretrain" and argv[1] in cli.COMMANDS
    config = argv[argv.index("--config") + 1]
    assert (ROOT / "training" / "configs" / f"{config}.yaml").is_file()


def test_rayjob_entrypoint_resolves_with_dry_run():
    argv = shlex.split(_one("RayJob")["spec"]["entrypoint"])
    r = subprocess.run([sys.executable, "-m", "jobs.cli", *argv[1:], "--dry-run"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "DS_ACCELERATOR": "cpu"})
    assert r.returncode == 0, r.stderr
    resolved = yaml.safe_load(r.stdout)
    assert resolved["data"]["path"] == argv[argv.index("--data") + 1]
    assert resolved["output"] == argv[argv.index("--output") + 1]


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "training" / "configs").glob("*.yaml")))
def test_every_shipped_config_resolves_with_dry_run(name, capsys):
    assert cli.main(["pretrain", "--config", name, "--dry-run"]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved["model"]["size"] and resolved["train"]["global_batch"] >= 1


# --- DeepSpeed ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_deepspeed_configs_are_what_the_trainer_builds(stage):
    import deepspeed.runtime.constants as ds_constants
    import deepspeed.runtime.zero.config as ds_zero
    from deepspeed.runtime.config import DeepSpeedConfig

    from training.train.config import load_config
    from training.train.engine import deepspeed_config

    shipped = json.loads((INFRA / "deepspeed" / f"zero{stage}.json").read_text())
    spec = _one("RayCluster")["spec"]
    (group,) = spec["workerGroupSpecs"]
    world = group["maxReplicas"] * int(group["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
    cfg = load_config("base", {"optim.name": "adamw", "parallel.zero_stage": stage, "optim.lr": 1e-4,
                              "parallel.device": "cuda", "parallel.precision": "bf16"})  # as resolve() leaves a GPU run
    assert shipped == deepspeed_config(cfg, world=world), "regenerate: see docs/cluster.md"
    known = {v for mod in (ds_constants, ds_zero) for k, v in vars(mod).items() if k.isupper() and isinstance(v, str)}
    assert set(shipped) <= known, set(shipped) - known  # DeepSpeed ignores unknown top-level keys silently
    assert shipped["train_batch_size"] == (shipped["train_micro_batch_size_per_gpu"]
                                          * shipped["gradient_accumulation_steps"] * world)
    # DeepSpeed's own parser (pydantic, extra keys forbidden) on the rest; it derives the batch
    # from this process's world of 1, so the global batch is left for it to compute.
    parsed = DeepSpeedConfig({k: v for k, v in shipped.items() if k != "train_batch_size"})
    assert parsed.zero_optimization_stage == stage and not parsed.bfloat16_config.enabled  # bf16 = autocast (engine.py)


# --- Beam launch settings ------------------------------------------------------------------------------


@pytest.mark.parametrize("name, runner", [("dataflow.flags", "DataflowRunner"), ("flink.flags", "FlinkRunner")])
def test_beam_flags_are_known_pipeline_options(name, runner):
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    flags = _flags(name)
    options = PipelineOptions(flags)
    known = options.get_all_options(drop_default=False)
    for flag in flags:
        key = flag.lstrip("-").split("=", 1)[0]
        assert key in known, f"{name}: {flag} is not a Beam pipeline option"
    assert options.view_as(StandardOptions).runner == runner


def test_flink_settings_match_the_beam_image():
    from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions

    beam = (INFRA / "docker" / "beam.Dockerfile").read_text()
    flink_version = re.search(r"ARG FLINK_VERSION=(\S+)", beam).group(1)
    beam_version = re.search(r"ARG BEAM_VERSION=(\S+)", beam).group(1)
    opts = PipelineOptions(_flags("flink.flags")).view_as(FlinkRunnerOptions)
    assert opts.flink_version == flink_version and flink_version in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS
    jar = f"/opt/beam/jars/beam-runners-flink-{flink_version}-job-server-{beam_version}.jar"
    assert opts.flink_job_server_jar == jar and opts.flink_submit_uber_jar
    assert "/opt/beam/jars/" in beam and "beam-runners-flink-${FLINK_VERSION}-job-server-${BEAM_VERSION}.jar" in beam


# --- the CronJob and its script --------------------------------------------------------------------------


def test_cronjob_runs_the_script_with_mounted_flags():
    cron = _one("CronJob")
    spec = cron["spec"]
    assert spec["concurrencyPolicy"] == "Forbid" and spec["schedule"].count(" ") == 4
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert set(c["resources"]) == {"requests", "limits"} and {"cpu", "memory"} <= set(c["resources"]["limits"])
    script = c["command"][-1]
    assert script.startswith("/opt/canine/") and (ROOT / script.removeprefix("/opt/canine/")).is_file()
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    assert env["CANINE_LANGUAGES"].split() and env["CANINE_OUTPUT"]
    flags_dir, flags_file = env["CANINE_BEAM_FLAGS"].rsplit("/", 1)
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == flags_dir)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    (gen,) = yaml.safe_load((INFRA / "kustomization.yaml").read_text())["configMapGenerator"]
    assert volume["configMap"]["name"] == gen["name"] and f"beam/{flags_file}" in gen["files"]


def test_rayjob_trains_on_what_the_cronjob_writes():
    """--data is <CANINE_OUTPUT>/<langs>/<date> for the CronJob's languages (pipeline/sources/dumps.py naming)."""
    from pipeline.sources.dumps import output_path, parse_dump

    (c,) = _one("CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    argv = shlex.split(_one("RayJob")["spec"]["entrypoint"])
    data = argv[argv.index("--data") + 1]
    date = data.rsplit("/", 1)[-1]
    assert re.fullmatch(r"\d{8}", date)
    assert data == output_path(env["CANINE_OUTPUT"], [parse_dump(f"{lang}:{date}") for lang in env["CANINE_LANGUAGES"].split()])


def _mirror(make_multistream, root, langs, date="20261101"):
    """A local mirror in Wikimedia's layout: dated multistream dumps of the bundled sample and
    the `latest` RSS feed that points at them."""
    for lang in langs:
        make_multistream(ROOT / "pipeline" / "sample" / f"{lang}wiki-{date}-pages-articles.xml", root / f"{lang}wiki" / date)
        feed = root / f"{lang}wiki" / "latest" / f"{lang}wiki-latest-pages-articles-multistream.xml.bz2-rss.xml"
        feed.parent.mkdir(parents=True)
        feed.write_text(f"<rss><channel><link>https://dumps.wikimedia.org/{lang}wiki/latest</link><item>"
                        f"<link>https://dumps.wikimedia.org/{lang}wiki/{date}</link></item></channel></rss>")


def _script(env):
    env = {"PATH": os.environ["PATH"], "DS_ACCELERATOR": "cpu", **env}
    return subprocess.run(["bash", str(INFRA / "schedule" / "preprocess-languages.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # the Beam job end to end
def test_schedule_script_preprocesses_the_languages_in_one_run(tmp_path, make_multistream):
    """The scheduled job for real: latest pinned from the mirror's feeds, one DirectRunner run."""
    from pipeline.output.output import published_manifest

    _mirror(make_multistream, tmp_path / "mirror", ["en", "ko"])
    r = _script({"CANINE": f"{sys.executable} -m jobs.cli", "CANINE_LANGUAGES": "ko en",
                 "CANINE_MIRROR": str(tmp_path / "mirror"), "CANINE_OUTPUT": str(tmp_path / "shards"),
                 "CANINE_PREPROCESS_ARGS": "--vocab-size 200 --seq-len 256"})
    assert r.returncode == 0, r.stderr[-3000:]
    manifest = published_manifest(str(tmp_path / "shards" / "en-ko" / "20261101"))
    assert manifest is not None and set(manifest.languages) == {"en", "ko"}
    assert "done ko:latest en:latest" in r.stderr
    again = _script({"CANINE": f"{sys.executable} -m jobs.cli", "CANINE_LANGUAGES": "en ko",
                     "CANINE_MIRROR": str(tmp_path / "mirror"), "CANINE_OUTPUT": str(tmp_path / "shards"),
                     "CANINE_PREPROCESS_ARGS": "--vocab-size 200 --seq-len 256"})
    assert again.returncode == 0 and "nothing to do" in again.stdout  # the same output, found by its date


RECORDER = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$CALLS"
"""


def test_schedule_script_passes_beam_flags_and_refuses_missing_dumps(tmp_path, make_multistream):
    """Argument passing, with a recording stand-in for `canine` (the run itself is tested above);
    then missing dumps, refused by `canine preprocess --dump` itself (the one dump resolution)."""
    _mirror(make_multistream, tmp_path / "mirror", ["en"])
    recorder, calls = tmp_path / "canine", tmp_path / "calls"
    recorder.write_text(RECORDER)
    recorder.chmod(0o755)
    env = {"CALLS": str(calls), "CANINE": str(recorder), "CANINE_LANGUAGES": "en", "CANINE_DUMP_DATE": "20261101",
           "CANINE_MIRROR": str(tmp_path / "mirror"), "CANINE_OUTPUT": "gs://b/shards/",
           "CANINE_BEAM_FLAGS": str(INFRA / "beam" / "dataflow.flags"), "CANINE_PREPROCESS_ARGS": "--workers 4"}
    r = _script(env)
    assert r.returncode == 0, r.stderr
    assert calls.read_text().splitlines() == [
        f"preprocess --dump en:20261101 --mirror {tmp_path / 'mirror'} --output gs://b/shards --workers 4 -- "
        f"{' '.join(_flags('dataflow.flags'))}"]
    r = _script({**env, "CANINE": f"{sys.executable} -m jobs.cli", "CANINE_LANGUAGES": "en ja",
                 "CANINE_OUTPUT": str(tmp_path / "shards"), "CANINE_BEAM_FLAGS": ""})
    assert r.returncode == 2 and "missing on the mirror: " in r.stderr and "/jawiki/20261101/" in r.stderr
    assert not (tmp_path / "shards").exists()  # nothing launched, nothing written
    r = _script({k: v for k, v in env.items() if k != "CANINE_OUTPUT"})
    assert r.returncode != 0 and "set CANINE_OUTPUT" in r.stderr
