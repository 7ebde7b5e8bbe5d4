"""Before a local run starts: what would fail late (memory, network) is refused now, in one line.

* Memory: the default CNN's weights and activations at the run's image size, batch,
  logical replicas and parallel trials, against this machine's memory (`--image-size
  5000` would otherwise die after the preparation with ResourceExhaustedError).
* TFDS: a `tfds:<name>` dataset not yet in the TFDS data folder needs the network;
  without it TFDS retries for minutes, so it is refused in seconds. The data folder is
  `$TFDS_DATA_DIR`, or `<output>/tensorflow_datasets` (nothing written in $HOME).
* Cores: more logical replicas than cores is allowed, with a warning giving the numbers.
* Disk: the dataset (raw pixels), each trial's two checkpoints and export, and the final
  model, at the configured sizes, against the free space where the output lives. The
  dataset's image count: a local folder's files, the sample's 1,797, a gs:// folder's
  image objects (listed by `gcs_access`), a prepared TFDS dataset's examples; a TFDS
  dataset still to download is not counted, and a note says so.
* Writable: the output and the registry must be folders this process can write (a
  read-only mount, an immutable folder, a file in the way), tried by creating and removing
  a file in the nearest folder that exists: nothing is left behind.
* Weights: a pretrained model's `--weights` must exist and load into its backbone, and
  `imagenet` be in Keras's cache or downloadable (no cached weights at all and the host
  unreachable: refused at once, without TensorFlow); checked in a subprocess
  (`trainer.weights_probe`; this process never imports TensorFlow), before the data is
  prepared, instead of by every trial.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from pipelines.jobs import replica_env
from pipelines.settings import Settings, SettingsError
from trainer.contract import ENCODED, record_format_for

TFDS_HOST = ("storage.googleapis.com", 443)  # where TFDS downloads from (GCS mirror first)
TFDS_DATA_ENV = "TFDS_DATA_DIR"
REACH_TIMEOUT_S = 5.0
# The CNN (trainer/model.py): three 3×3 conv (16/32/64) + 2×2 pool blocks, then
# Dense(num_units) on the (size/8)² × 64 features. Float32 bytes held per input pixel
# for one image's activations in the forward and backward pass (measured layout: input 3
# + conv 16 + pool/relu 2 × 4 + conv 32 / 4 + … ≈ 45 floats, × 2 for the gradients).
ACTIVATION_BYTES_PER_PIXEL = 45 * 4 * 2
DENSE_FEATURES = 64  # channels of the last conv block
MAX_UNITS = 256  # the largest num_units of the presets
PARAM_COPIES = 3  # weights, gradients, optimizer momentum
MEMORY_SHARE = 0.8  # of the machine's memory a run may plan to use
# A container's memory limit (cgroup v2, then v1): a run plans within it, not the host's RAM.
MEMORY_LIMIT_FILES = (
    Path("/sys/fs/cgroup/memory.max"),
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)
GIB = 1 << 30
KERAS_FALLBACK_HOME = "/tmp/.keras"  # Keras's cache when its home is not writable
SAMPLE_IMAGES = 1797  # scikit-learn's digits, the `sample` source (dataprep.sources)
# Encoded (JPEG 90) records' bytes as a share of raw pixels, a ceiling: measured 1/18 on the
# benchmark's images at 224 px (benchmarks/bench_prepare_scale.py); photos run 1/5 to 1/10.
ENCODED_DISK_SHARE = 0.25
WEIGHTS_PROBE_TIMEOUT_S = 300.0  # importing TensorFlow and building a backbone, shared cores


def machine_memory() -> int:
    """Bytes of memory this process may use: physical memory, or its cgroup's limit if lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in MEMORY_LIMIT_FILES:
        try:
            limit = path.read_text().strip()
        except OSError:
            continue
        if limit.isdigit():  # cgroup v2 writes `max` when there is no limit
            total = min(total, int(limit))
    return total


def trial_bytes(image_size: int, batch_size: int, replicas: int) -> int:
    """Estimated peak bytes of one training process of the CNN (all its logical replicas)."""
    features = (image_size // 8) ** 2 * DENSE_FEATURES
    params = features * MAX_UNITS * 4 * PARAM_COPIES
    activations = batch_size * image_size**2 * ACTIVATION_BYTES_PER_PIXEL
    return replicas * (params + activations)


def planned_bytes(settings: Settings, image_size: int | None = None) -> int:
    """Peak bytes of the study's parallel trials or of the final job, whichever is more.

    A trial with workers (`trial_workers`) is one process per replica, as the final job.
    """
    size = image_size or settings.data.image_size
    processes = settings.study.parallel_trials * (1 + settings.training.trial_workers)
    trials = processes * trial_bytes(
        size, settings.training.batch_size, max(1, settings.machines.trial_accelerator_count)
    )
    final = (1 + settings.training.workers) * trial_bytes(
        size, settings.training.batch_size, max(1, settings.machines.final_accelerator_count)
    )
    return max(trials, final)


def check_memory(settings: Settings, memory: int | None = None) -> None:
    """Refuse an image size whose training cannot fit in this machine's memory.

    The estimate is the `cnn` model's (its Dense layer grows with the image); other
    models are not estimated here yet.

    Raises:
        SettingsError: Naming the image size, the estimate and the largest size that fits.
    """
    if settings.architecture.model != "cnn":
        return
    memory = memory or machine_memory()
    budget = memory * MEMORY_SHARE
    need = planned_bytes(settings)
    if need <= budget:
        return
    fits = settings.data.image_size
    while fits > 1 and planned_bytes(settings, fits) > budget:
        fits = int(fits * 0.9)
    raise SettingsError(
        f"image_size={settings.data.image_size}: training would need ~{need / GIB:.0f} GiB "
        f"({settings.data.image_size}×{settings.data.image_size} px × batch "
        f"{settings.training.batch_size} × {settings.machines.trial_accelerator_count} logical "
        f"replica(s) × {settings.study.parallel_trials} parallel trial(s)"
        f"{_processes_per_trial(settings)}, and the CNN's "
        f"Dense({MAX_UNITS}) weights on "
        f"{(settings.data.image_size // 8) ** 2 * DENSE_FEATURES:,} features), more than "
        f"{MEMORY_SHARE:.0%} of this machine's {memory / GIB:.0f} GiB; expected "
        f"image_size <= {fits} at these settings (or a smaller batch or fewer parallel trials)"
    )


def _processes_per_trial(settings: Settings) -> str:
    """` × N processes per trial` for a trial with workers, else nothing."""
    workers = settings.training.trial_workers
    return f" × {1 + workers} processes per trial (trial_workers={workers})" if workers else ""


def tfds_data_dir(output: str) -> str:
    """Where TFDS keeps datasets for this run: `$TFDS_DATA_DIR`, else inside the output."""
    return os.environ.get(TFDS_DATA_ENV) or str(Path(output).resolve() / "tensorflow_datasets")


def tfds_prepared(data_dir: str, name: str) -> bool:
    """Whether `name` (optionally `name/config`) is already prepared in `data_dir`."""
    return any(Path(data_dir, name.split(":")[0]).glob("**/dataset_info.json"))


def unreachable(host: tuple[str, int], timeout: float) -> str | None:
    """Why `host` cannot be reached within `timeout` seconds (a TCP connect), or None."""
    try:
        socket.create_connection(host, timeout=timeout).close()
    except OSError as err:
        return err.strerror or type(err).__name__
    return None


def check_tfds_reachable(
    source: str, data_dir: str, host: tuple[str, int] = TFDS_HOST, timeout: float = REACH_TIMEOUT_S
) -> None:
    """Refuse, in seconds, a TFDS dataset that must be downloaded when the network is not there.

    Raises:
        SettingsError: Naming the source, the data folder and why the host is unreachable.
    """
    if not source.startswith("tfds:"):
        return
    name = source.removeprefix("tfds:")
    if tfds_prepared(data_dir, name):
        return
    if reason := unreachable(host, timeout):
        raise SettingsError(
            f"source={source}: not prepared in {data_dir} and {host[0]} (TFDS's download "
            f"host) is unreachable ({reason}); connect to the network, or prepare it on a "
            f"machine that has one and copy it there (set {TFDS_DATA_ENV} to use another folder)"
        )


def replica_warning(settings: Settings, cores: int | None = None) -> str | None:
    """A line when a trial runs more logical replicas than this process's cores, else None."""
    cores = cores or replica_env.host_cores()  # the cores the local executors share out
    per_trial = max(1, settings.machines.trial_accelerator_count)
    if per_trial <= cores:
        return None
    return (
        f"warning: trial_accelerator_count={per_trial} logical replicas per trial on "
        f"{cores} core(s) (× {settings.study.parallel_trials} parallel trial(s)), global batch "
        f"{per_trial} × {settings.training.batch_size} = "
        f"{per_trial * settings.training.batch_size}: the replicas "
        f"share the cores and each step is slower; --trial-accelerators {cores} matches the cores"
    )


def check_weights_load(settings: Settings, timeout: float = WEIGHTS_PROBE_TIMEOUT_S) -> None:
    """Refuse pretrained weights that every trial would fail to load (see the module docstring).

    Raises:
        SettingsError: The trainer's one-line reason (the file, or why it cannot be had).
    """
    from trainer.contract import WEIGHTS_CHOICES
    from trainer.models import MODELS, check_weights

    spec = MODELS.get(settings.architecture.model)
    if spec is None or not spec.pretrained:
        return
    weights = check_weights(spec, settings.architecture.weights)
    if weights == "none":
        return
    if weights == "imagenet":
        check_imagenet_reachable()
    named = weights in WEIGHTS_CHOICES  # imagenet: cached or downloadable, the probe says
    if not named and "://" not in weights and not Path(weights).is_file():
        raise SettingsError(f"--weights={weights}: no such file (expected a Keras weights file)")
    argv = [sys.executable, "-m", "trainer.weights_probe", spec.name, weights]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"}
    try:
        probe = subprocess.run(
            [*argv, str(settings.data.image_size)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise SettingsError(
            f"--weights={weights}: loading them into {spec.name} took over {timeout:.0f} s"
        ) from None
    if probe.returncode != 0:
        lines = [x for x in probe.stderr.splitlines() if x.strip()]
        said = next((x for x in reversed(lines) if ": error: " in x), (lines or ["?"])[-1])
        raise SettingsError(said.split(": error: ", 1)[-1])


def keras_caches() -> list[Path]:
    """Where Keras keeps downloaded weights: `$KERAS_HOME` (default ~/.keras), else /tmp's."""
    home = os.environ.get("KERAS_HOME") or os.path.expanduser("~/.keras")
    return [Path(home) / "models", Path(KERAS_FALLBACK_HOME) / "models"]


def check_imagenet_reachable(timeout: float = REACH_TIMEOUT_S) -> None:
    """Refuse `imagenet` in seconds when Keras's cache holds no weights and the host is down.

    Which file a backbone needs is Keras's business: a cache with any `.h5` file, or a
    reachable host, leaves the answer to the probe (which imports TensorFlow).

    Raises:
        SettingsError: Naming the empty cache, the host and why it is unreachable.
    """
    caches = keras_caches()
    if any(any(cache.glob("*.h5")) for cache in caches):
        return
    host = TFDS_HOST  # Keras's applications' weights are served from the same host
    if reason := unreachable(host, timeout):
        raise SettingsError(
            f"--weights=imagenet: not in Keras's cache ({caches[0]} holds no weights) and "
            f"{host[0]} (where Keras downloads them) is unreachable ({reason}); pass --weights "
            "PATH to a Keras weights file (local or gs://)"
        )


def model_params(settings: Settings) -> int:
    """About how many parameters a trial's model has (0: a model not estimated here).

    A pretrained backbone: its parameters and its head's, both from its `ModelSpec`.
    """
    from trainer.models import MODELS

    units = MAX_UNITS
    if settings.architecture.model == "cnn":
        return (settings.data.image_size // 8) ** 2 * DENSE_FEATURES * units
    spec = MODELS.get(settings.architecture.model)
    if spec and spec.backbone:
        return spec.backbone.params + spec.backbone.pooled_width * units
    return 0


def source_images(source: str) -> int:
    """Image files in a local folder source (0: not a local folder, not counted)."""
    from trainer.contract import IMAGE_EXTENSIONS

    if not os.path.isdir(source):
        return 0
    return sum(
        1
        for _, _, files in os.walk(source)
        for name in files
        if name.lower().endswith(IMAGE_EXTENSIONS)
    )


def tfds_examples(data_dir: str, name: str) -> int | None:
    """Examples of a TFDS dataset prepared in `data_dir` (its dataset_info.json), else None."""
    infos = sorted(Path(data_dir, name.split(":")[0]).glob("**/dataset_info.json"))
    if not infos:
        return None
    splits = json.loads(infos[-1].read_text()).get("splits", [])
    return sum(int(n) for split in splits for n in split.get("shardLengths", []))


def dataset_images(settings: Settings, gcs_images: int | None = None) -> int | None:
    """Images the data step will prepare, by source kind; None where it cannot be known yet.

    A local folder: its image files; `sample`: the digits; gs://: the image objects the
    access check listed (`gcs_images`); `tfds:` prepared here: its examples; a TFDS
    dataset still to download: None (its size is only known once downloaded).
    """
    source = settings.data.source
    if source == "sample":
        return SAMPLE_IMAGES
    if source.startswith("gs://"):
        return gcs_images
    if source.startswith("tfds:"):
        return tfds_examples(tfds_data_dir(settings.local.output), source.removeprefix("tfds:"))
    return source_images(source)


def planned_disk_bytes(settings: Settings, images: int | None = None) -> int:
    """Bytes the run writes: the dataset, each trial's checkpoints and export, the final model.

    `images`: the dataset's image count (default: `source_images` of a local folder).
    """
    if images is None:
        images = source_images(settings.data.source)
    dataset = images * settings.data.image_size**2 * 3
    if record_format_for(settings.data.record_format, settings.data.image_size) == ENCODED:
        dataset = int(dataset * ENCODED_DISK_SHARE)
    model = model_params(settings) * 4  # float32 weights
    per_trial = model * (2 * PARAM_COPIES + 1)  # two checkpoints (with slots), one export
    return dataset + (settings.study.max_trials + 1) * per_trial


def size_text(size: int) -> str:
    """Bytes for people: GiB from 1 GiB up, else MiB (a 6 MB disk is not '0.0 GiB')."""
    return f"{size / GIB:.1f} GiB" if size >= GIB else f"{size / (1 << 20):.1f} MiB"


def check_disk(
    settings: Settings, free: int | None = None, gcs_images: int | None = None
) -> str | None:
    """Refuse a run whose dataset, trials and export cannot fit on the output's disk.

    `gcs_images`: a gs:// source's image objects (`gcs_access.check_gcs`).

    Returns:
        A note when the dataset's size is not known yet (a TFDS dataset to download): the
        estimate then counts the trials and the final model only, and says so.

    Raises:
        SettingsError: The estimate, what it is made of, and the free space.
    """
    images = dataset_images(settings, gcs_images)
    need = planned_disk_bytes(settings, images or 0)
    note = None
    if images is None:
        note = (
            f"disk check: the size of {settings.data.source} is not known before it is downloaded, "
            "so only the trials' checkpoints and exports and the final model are counted"
        )
    if free is None:
        where = Path(settings.local.output).resolve()
        while not where.exists():
            where = where.parent
        free = shutil.disk_usage(where).free
    if need <= free:
        return note
    raise SettingsError(
        f"output={settings.local.output}: the run would write ~{size_text(need)} (dataset at "
        f"{settings.data.image_size} px, {settings.study.max_trials} trials' checkpoints and "
        f"exports, the final model) and {size_text(free)} is free there; expected more free "
        "space, or "
        "fewer trials or a smaller image size"
    )


def check_writable(name: str, path: str) -> None:
    """Refuse a folder this process cannot write in (`name`: the setting, for the message).

    The folder, or the nearest folder above it that exists (where the run would create
    it), is tried with a temporary file, removed at once; root's permissions and
    `chattr +i` are what the kernel says, not what the mode bits suggest.

    Raises:
        SettingsError: Not a folder, or not writable (the system's reason).
    """
    target = Path(path).absolute()
    where = target
    while not where.exists() and where != where.parent:
        where = where.parent
    if not where.is_dir():
        raise SettingsError(
            f"{name}={path}: {where} is a file, not a folder; expected a folder this run can write"
        )
    try:
        fd, probe = tempfile.mkstemp(prefix=".hpt-write-probe-", dir=where)
    except OSError as err:
        raise SettingsError(
            f"{name}={path}: cannot write in {where} ({err.strerror or err}); "
            "expected a folder this run can write"
        ) from None
    os.close(fd)
    os.unlink(probe)


def tracking_uri(settings: Settings) -> str:
    """The MLflow store a local run writes to: the setting (SQLite: absolute), else the default."""
    from pipelines.tracking import store

    given = settings.results.tracking_uri
    return store.absolute(given) if given else store.local_default(settings.local.output)


def check_tracking(settings: Settings, say: Callable[[str], None]) -> None:
    """Refuse an unreachable store under `tracking=mlflow`; under auto, `say` it (one line)."""
    from pipelines.tracking import store

    try:
        store.open_store(settings.results.tracking, tracking_uri(settings), env={}, say=say)
    except store.TrackingError as err:
        raise SettingsError(str(err)) from None
