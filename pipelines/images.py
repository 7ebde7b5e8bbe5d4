"""Container image settings: image URIs, the serving container, and what each image installs.

Standard library only (and setuptools for package discovery), runnable as a plain script:
the Dockerfiles run `python images.py requirements ...` on a bare Python base image, so the
versions an image installs come from the pins in `pyproject.toml` and nowhere
else. `python -m pipelines.images uris --registry ... --tag ...` prints the URIs
as the environment variables the pipeline settings read.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
DEFAULT_REGISTRY = "us-docker.pkg.dev/your-project/hpt-pipeline"
DEFAULT_TAG = "latest"
IMAGES = ("trainer", "components")
ENV_VARS = {"trainer": "HPT_TRAINER_IMAGE", "components": "HPT_COMPONENTS_IMAGE"}
PREDICTION_CONTAINERS_SOURCE = (
    "https://cloud.google.com/vertex-ai/docs/predictions/pre-built-containers"
)


@dataclasses.dataclass(frozen=True)
class ServingContainer:
    """A prebuilt Vertex prediction container and how long Vertex keeps it available."""

    name: str  # the image name under vertex-ai/prediction, e.g. tf2-cpu.2-15
    tensorflow: str  # the TensorFlow minor version it serves with
    gpu: bool
    end_of_availability: datetime.date  # after it, models using it cannot be deployed
    source: str = PREDICTION_CONTAINERS_SOURCE

    def uri(self, region: str = "us-central1") -> str:
        """The container's URI in the Artifact Registry multi-region nearest `region`."""
        area = region.split("-")[0]
        host = f"{area}-docker" if area in ("europe", "asia") else "us-docker"
        return f"{host}.pkg.dev/vertex-ai/prediction/{self.name}:latest"


# The one table of serving containers. The newest prebuilt TensorFlow prediction containers
# are 2.15 (none for 2.21; a TF 2.21 SavedModel of standard ops loads there, see
# images/README.md and `make serving-check`); their end-of-availability date is the one
# Vertex's prebuilt-containers page gives for TensorFlow 2.15 (read for issue 32).
SERVING_CONTAINERS = (
    ServingContainer(
        "tf2-cpu.2-15", "2.15", gpu=False, end_of_availability=datetime.date(2027, 1, 14)
    ),
    ServingContainer(
        "tf2-gpu.2-15", "2.15", gpu=True, end_of_availability=datetime.date(2027, 1, 14)
    ),
)


def serving_container_for(uri: str) -> ServingContainer | None:
    """The table's entry for a serving image URI (any region), or None for another image."""
    match = re.fullmatch(r"[a-z]+-docker\.pkg\.dev/vertex-ai/prediction/([^:@/]+):latest", uri)
    return next((c for c in SERVING_CONTAINERS if match and c.name == match.group(1)), None)


def serving_image_uri(region: str = "us-central1", gpu: bool = False) -> str:
    """The table's serving container (CPU, or GPU) from the multi-region nearest `region`."""
    return next(c for c in SERVING_CONTAINERS if c.gpu == gpu).uri(region)


SERVING_IMAGE_URI = serving_image_uri()
SERVING_IMAGE_URI_GPU = serving_image_uri(gpu=True)

# What the trainer image installs besides the `gpu` extra (TensorFlow): the trainer
# imports only tensorflow/keras/numpy and hypertune, and tf.summary needs tensorboard.
TRAINER_PACKAGES = ("cloudml-hypertune", "tensorboard")


def registry(project: str, region: str = "us-central1", repository: str = "hpt-pipeline") -> str:
    """Artifact Registry prefix `REGION-docker.pkg.dev/PROJECT/REPOSITORY`."""
    return f"{region}-docker.pkg.dev/{project}/{repository}"


def image_uris(registry: str = DEFAULT_REGISTRY, tag: str = DEFAULT_TAG) -> dict[str, str]:
    """URIs of the project's images, `{"trainer": ..., "components": ...}`.

    `tag` may also be a digest (`sha256:...`), giving `NAME@sha256:...`.
    """
    sep = "@" if tag.startswith("sha256:") else ":"
    return {name: f"{registry.rstrip('/')}/{name}{sep}{tag}" for name in IMAGES}


def requirement_name(requirement: str) -> str:
    """Normalized distribution name: `tensorflow[and-cuda]==2.21.0` → `tensorflow`."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not name:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", name.group(1)).lower()


def requirements(
    extra: str | Sequence[str], only: Sequence[str] = (), pyproject: Path | str = PYPROJECT
) -> list[str]:
    """The requirement lines an image installs: the dependencies (or `only` those) + extras."""
    project = tomllib.loads(Path(pyproject).read_text())["project"]
    extras = project.get("optional-dependencies", {})
    chosen = [extra] if isinstance(extra, str) else list(extra)
    for name in chosen:
        if name not in extras:
            raise ValueError(f"unknown extra {name!r}; pyproject has {sorted(extras)}")
    deps = list(project["dependencies"])
    if only:
        wanted = {requirement_name(n) for n in only}
        deps = [d for d in deps if requirement_name(d) in wanted]
        missing = wanted - {requirement_name(d) for d in deps}
        if missing:
            raise ValueError(f"not in the project's dependencies: {sorted(missing)}")
    return deps + [r for name in chosen for r in extras[name]]


def project_packages(pyproject: Path | str = PYPROJECT) -> list[str]:
    """The top-level packages the project ships, as pip's build finds them.

    The one list of what ships: `[tool.setuptools.packages.find]` in pyproject.toml,
    resolved by setuptools' own discovery. The components image installs the project
    with pip, mypy checks these packages and the tests import them from the image's
    layout, so adding a package there is the only edit it needs.
    """
    from setuptools import find_packages  # the build backend's own discovery

    path = Path(pyproject)
    find = tomllib.loads(path.read_text())["tool"]["setuptools"]["packages"]["find"]
    found = find_packages(
        where=str(path.parent / find.get("where", ["."])[0]),
        include=find.get("include", ("*",)),
        exclude=find.get("exclude", ()),
    )
    return sorted(name for name in found if "." not in name)


def main(argv: Sequence[str] | None = None) -> None:
    """`requirements --extra E [--only N ...]`, `packages [--mypy]` or `uris [--registry R]`."""
    parser = argparse.ArgumentParser(prog="images", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    req = sub.add_parser("requirements", help="print an image's requirement lines")
    req.add_argument("--extra", required=True, action="append")
    req.add_argument("--only", nargs="*", default=())
    req.add_argument("--pyproject", default=str(PYPROJECT))
    packages = sub.add_parser("packages", help="print the project's top-level packages")
    packages.add_argument("--mypy", action="store_true", help="as mypy's `-p NAME` arguments")
    packages.add_argument("--pyproject", default=str(PYPROJECT))
    uris = sub.add_parser("uris", help="print the image URIs as NAME=URI lines")
    uris.add_argument("--registry", default=DEFAULT_REGISTRY)
    uris.add_argument("--tag", default=DEFAULT_TAG)
    args = parser.parse_args(argv)
    if args.command == "requirements":
        print("\n".join(requirements(args.extra, args.only, args.pyproject)))
    elif args.command == "packages":
        names = project_packages(args.pyproject)
        print(" ".join(f"-p {name}" for name in names) if args.mypy else "\n".join(names))
    else:
        for name, uri in image_uris(args.registry, args.tag).items():
            print(f"{ENV_VARS[name]}={uri}")


if __name__ == "__main__":
    main()
