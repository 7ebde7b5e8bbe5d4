"""A Kubernetes API server replaced *behind* the real `kubernetes` client.

`Cluster.core` and `Cluster.custom` are the real `CoreV1Api` and `CustomObjectsApi` over
an `ApiClient` whose HTTP call (`ApiClient.request`) answers from this object: the real
client builds every path and query, refuses keywords it does not know (a misspelt
`dry_run` fails here as it would against a cluster) and deserializes the answers into its
own models. Each answer is what a standard Kubeflow install's API server says, for the
condition the test sets up: a profile namespace or not, a TFJob API or not (Kubeflow
1.11), Katib 0.17 (its defaulting webhook drops `distribution`) or 0.18+ (it defaults it
to `uniform`), the data claim's access modes, the nodes' GPUs, 403s, and a Katib
controller that restarts a patched Experiment only after some polls (and its `katib-config`
trial resources); Kubeflow Trainer v2
(`trainer="2.1"` or `"2.3"`: its API, its OpenAPI document from the release's CRD in
tests/crds, the TensorFlow runtime installed or not) and the step's pods (`pods`).
"""

from __future__ import annotations

import copy
import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

PROFILE_LABELS = {
    "app.kubernetes.io/part-of": "kubeflow-profile",
    "katib.kubeflow.org/metrics-collector-injection": "enabled",
    "pipelines.kubeflow.org/enabled": "true",
    "istio-injection": "enabled",
    # kubeflow/manifests v1.11.0 applications/profiles/pss/namespace-labels.yaml
    "pod-security.kubernetes.io/enforce": "baseline",
}
TFJOB_RESOURCE = {
    "name": "tfjobs",
    "singularName": "tfjob",
    "namespaced": True,
    "kind": "TFJob",
    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
}

TRAINJOB_RESOURCE = {
    "name": "trainjobs",
    "singularName": "trainjob",
    "namespaced": True,
    "kind": "TrainJob",
    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
}
CRDS = Path(__file__).parent / "crds"


def trainer_crd(release: str, what: str = "trainjobs") -> dict[str, Any]:
    """A Kubeflow Trainer release's CRD as shipped (`release`: 2.1 or 2.3)."""
    import yaml

    path = CRDS / f"trainer-v{release}.0-{what}.yaml.gz"
    return yaml.safe_load(gzip.decompress(path.read_bytes()))  # type: ignore[no-any-return]


class Answer:
    """What `ApiClient.deserialize` reads: status, reason, JSON `data`, headers."""

    def __init__(self, obj: Any, status: int = 200) -> None:
        self.status, self.reason, self.data = status, "OK", json.dumps(obj)

    def getheaders(self) -> dict[str, str]:
        return {"content-type": "application/json"}

    def getheader(self, name: str, default: Any = None) -> Any:
        return self.getheaders().get(name.lower(), default)


def refusal(status: int, reason: str, message: str) -> client.ApiException:
    """An `ApiException` as the client raises it for a `Status` answer."""
    err = client.ApiException(status=status, reason=reason)
    err.body = json.dumps({"kind": "Status", "code": status, "reason": reason, "message": message})
    return err


class Cluster:
    """The API server's state and answers (see the module docstring)."""

    def __init__(
        self,
        *,
        namespace: str = "team",
        labels: dict[str, str] | None = None,
        tfjob_api: bool = True,
        katib: str = "0.19",
        claims: dict[str, list[str]] | None = None,
        gpus: list[int] | None = None,
        forbidden: tuple[str, ...] = (),
        restart_after: int = 2,
        trainer: str | None = None,
        runtime_installed: bool = True,
        pods: list[dict[str, Any]] | None = None,
        katib_trial_resources: list[str] | None = None,
    ) -> None:
        self.namespace = namespace
        self.labels = PROFILE_LABELS if labels is None else labels
        self.tfjob_api, self.katib = tfjob_api, katib
        self.claims = {"hpt-data": ["ReadWriteMany"]} if claims is None else claims
        self.gpus = [0, 0] if gpus is None else gpus
        self.forbidden = forbidden
        self.restart_after = restart_after  # polls after a patch before Katib restarts it
        self.trainer, self.runtime_installed = trainer, runtime_installed
        self.pods = pods or []  # what every pod listing answers
        self.katib_trial_resources = katib_trial_resources  # katib-config's; None: no ConfigMap
        self.deleted: list[tuple[str, str]] = []
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}  # (plural, name) -> object
        self.statuses: list[dict[str, Any]] = []  # what the controller writes, poll by poll
        self.trials: list[dict[str, Any]] = []
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self._after_patch: int | None = None
        api = client.ApiClient(client.Configuration(host="https://kube.test"))
        api.request = self.request  # type: ignore[method-assign]
        self.core = client.CoreV1Api(api_client=api)
        self.custom = client.CustomObjectsApi(api_client=api)

    # ----------------------------------------------------------------- HTTP
    def request(self, method: str, url: str, query_params: Any = None, **kw: Any) -> Answer:
        path = url.removeprefix("https://kube.test")
        query = dict(query_params or [])
        self.calls.append((method, path, query))
        for pattern, handler in self.routes():
            match = re.fullmatch(pattern, path)
            if match and handler[0] == method:
                return Answer(handler[1](*match.groups(), query=query, body=kw.get("body")))
        raise refusal(404, "NotFound", f"the server could not find the requested resource {path}")

    def routes(self) -> list[tuple[str, tuple[str, Callable[..., Any]]]]:
        ns = r"/api/v1/namespaces/([^/]+)"
        custom = (
            r"/apis/(?:kubeflow\.org|trainer\.kubeflow\.org)/(v1|v1beta1|v1alpha1)"
            r"/namespaces/([^/]+)/([a-z]+)"
        )
        trainer = r"/apis/trainer\.kubeflow\.org/v1alpha1"
        return [
            (ns, ("GET", self.namespace_object)),
            (ns + r"/pods", ("GET", self.pod_list)),
            (ns + r"/configmaps/([^/]+)", ("GET", self.config_map)),
            (trainer, ("GET", self.trainer_discovery)),
            (r"/openapi/v3" + trainer, ("GET", self.openapi)),
            (trainer + r"/clustertrainingruntimes/([^/]+)", ("GET", self.runtime)),
            (custom + r"/([^/]+)", ("DELETE", self.delete)),
            (ns + r"/persistentvolumeclaims/([^/]+)", ("GET", self.claim)),
            (r"/api/v1/nodes", ("GET", self.nodes)),
            (r"/apis/kubeflow.org/v1", ("GET", self.discovery)),
            (custom, ("POST", self.create)),
            (custom, ("GET", self.listing)),
            (custom + r"/([^/]+)", ("GET", self.get)),
            (custom + r"/([^/]+)", ("PATCH", self.patch)),
        ]

    def _allowed(self, what: str) -> None:
        if what in self.forbidden:
            raise refusal(403, "Forbidden", f'{what} is forbidden: User "system:serviceaccount"')

    # ----------------------------------------------------------------- core
    def namespace_object(self, name: str, **_: Any) -> dict[str, Any]:
        self._allowed("namespaces")
        if name != self.namespace:
            raise refusal(404, "NotFound", f'namespaces "{name}" not found')
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": self.labels},
        }

    def claim(self, namespace: str, name: str, **_: Any) -> dict[str, Any]:
        self._allowed("persistentvolumeclaims")
        if name not in self.claims:
            raise refusal(404, "NotFound", f'persistentvolumeclaims "{name}" not found')
        modes = self.claims[name]
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": modes, "resources": {"requests": {"storage": "10Gi"}}},
            "status": {"phase": "Bound", "accessModes": modes},
        }

    def nodes(self, **_: Any) -> dict[str, Any]:
        self._allowed("nodes")
        items = []
        for i, count in enumerate(self.gpus):
            allocatable = {"cpu": "8", "memory": "32Gi"}
            if count:
                allocatable["nvidia.com/gpu"] = str(count)
            items.append(
                {"metadata": {"name": f"node-{i}"}, "status": {"allocatable": allocatable}}
            )
        return {"apiVersion": "v1", "kind": "NodeList", "items": items}

    def discovery(self, **_: Any) -> dict[str, Any]:
        if not self.tfjob_api:  # Kubeflow 1.11: Trainer v2 only, no kubeflow.org/v1 group version
            raise refusal(404, "NotFound", "the server could not find the requested resource")
        return {
            "kind": "APIResourceList",
            "groupVersion": "kubeflow.org/v1",
            "resources": [TFJOB_RESOURCE],
        }

    def pod_list(self, namespace: str, *, query: Any, **_: Any) -> dict[str, Any]:
        self._allowed("pods")
        return {"apiVersion": "v1", "kind": "PodList", "items": self.pods}

    def config_map(self, namespace: str, name: str, **_: Any) -> dict[str, Any]:
        """Katib's `katib-config` in `kubeflow`, its `trialResources` as the test sets them."""
        import yaml

        self._allowed("configmaps")
        if (namespace, name) != ("kubeflow", "katib-config") or self.katib_trial_resources is None:
            raise refusal(404, "NotFound", f'configmaps "{name}" not found')
        config = {
            "apiVersion": "config.kubeflow.org/v1beta1",
            "kind": "KatibConfig",
            "init": {"controller": {"trialResources": self.katib_trial_resources}},
        }
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"katib-config.yaml": yaml.safe_dump(config)},
        }

    # ----------------------------------------------------------------- Trainer v2
    def trainer_discovery(self, **_: Any) -> dict[str, Any]:
        if not self.trainer:
            raise refusal(404, "NotFound", "the server could not find the requested resource")
        return {
            "kind": "APIResourceList",
            "groupVersion": "trainer.kubeflow.org/v1alpha1",
            "resources": [TRAINJOB_RESOURCE],
        }

    def openapi(self, **_: Any) -> dict[str, Any]:
        if not self.trainer:
            raise refusal(404, "NotFound", "the server could not find the requested resource")
        schema = trainer_crd(self.trainer)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        name = "com.github.kubeflow.trainer.v2.pkg.apis.trainer.v1alpha1.TrainJob"
        return {"openapi": "3.0.0", "components": {"schemas": {name: schema}}}

    def runtime(self, name: str, **_: Any) -> dict[str, Any]:
        self._allowed("clustertrainingruntimes")
        if not self.runtime_installed:
            raise refusal(404, "NotFound", f'clustertrainingruntimes "{name}" not found')
        return {"kind": "ClusterTrainingRuntime", "metadata": {"name": name}}

    # ----------------------------------------------------------------- custom objects
    def delete(self, version: str, namespace: str, plural: str, name: str, **_: Any) -> Any:
        self.deleted.append((plural, name))
        self.objects.pop((plural, name), None)
        return {"kind": "Status", "status": "Success"}

    def admit(self, body: dict[str, Any]) -> dict[str, Any]:
        """Katib's defaulting webhook: 0.17 drops `distribution`, 0.18+ defaults it."""
        out = copy.deepcopy(body)
        if out.get("kind") == "Experiment":
            for p in out["spec"].get("parameters") or []:
                space = p.setdefault("feasibleSpace", {})
                if self.katib == "0.17":
                    space.pop("distribution", None)
                else:
                    space.setdefault("distribution", "uniform")
        return out

    def create(self, version: str, namespace: str, plural: str, *, query: Any, body: Any) -> Any:
        name = body["metadata"]["name"]
        if (plural, name) in self.objects:
            raise refusal(409, "AlreadyExists", f'{plural}.kubeflow.org "{name}" already exists')
        admitted = self.admit(body)
        if query.get("dryRun") != "All":
            self.objects[(plural, name)] = admitted
        return admitted

    def get(self, version: str, namespace: str, plural: str, name: str, **_: Any) -> Any:
        if (plural, name) not in self.objects:
            raise refusal(404, "NotFound", f'{plural}.kubeflow.org "{name}" not found')
        obj = self.objects[(plural, name)]
        if self._after_patch is not None:  # Katib restarts asynchronously
            self._after_patch -= 1
            if self._after_patch > 0:
                return obj  # still the finished status of before the patch
            self._after_patch = None
        if self.statuses:
            obj["status"] = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return obj

    def patch(
        self, version: str, namespace: str, plural: str, name: str, *, body: Any, **_: Any
    ) -> Any:
        obj = self.objects[(plural, name)]
        obj["spec"].update(body["spec"])
        self._after_patch = self.restart_after
        return obj

    def listing(self, version: str, namespace: str, plural: str, *, query: Any, **_: Any) -> Any:
        return {"items": self.trials if plural == "trials" else []}


def held_to(api_class: type, method: str, *args: Any, **kwargs: Any) -> None:
    """Raise TypeError where the real `api_class.method` would refuse these arguments.

    The generated methods take `**kwargs` and check them at call time against the
    `all_params` list of `<method>_with_http_info`; that list is read from its source.
    """
    import inspect

    real = getattr(api_class, method)
    inspect.signature(real).bind(None, *args, **kwargs)
    source = inspect.getsource(getattr(api_class, f"{method}_with_http_info"))
    listed = re.search(r"all_params = \[(.*?)\]", source, re.S)
    allowed = set(re.findall(r"'(\w+)'", listed.group(1) if listed else ""))
    unknown = set(kwargs) - allowed
    if unknown:
        raise TypeError(f"{api_class.__name__}.{method}: unexpected keyword {sorted(unknown)}")


class HeldCustomObjects:
    """A base for hand-written `CustomObjectsApi` fakes: every call is `held_to` the real one.

    Its custom-object calls and `get_api_resources` are checked against the real method's
    signature and keywords before the fake answers; discovery answers as the `Cluster`
    does (the TFJob and Katib APIs served).
    """

    def __getattribute__(self, name: str) -> Any:
        from kubernetes.client import CustomObjectsApi

        attr = object.__getattribute__(self, name)
        if name.endswith("_custom_object") or name == "get_api_resources":

            def held(*args: Any, **kwargs: Any) -> Any:
                held_to(CustomObjectsApi, name, *args, **kwargs)
                return attr(*args, **kwargs)

            return held
        return attr

    def get_api_resources(self, group: str, version: str) -> Any:
        return Cluster().custom.get_api_resources(group, version)


INJECTED = ("api", "core_api", "clock", "sleep", "now", "echo")  # a step's injectable keywords


def call_with_request(step: Callable[..., Any], request: type, args: dict[str, Any]) -> Any:
    """`step(request(**fields), **injected)` from one flat dict, as the components call it."""
    injected = {k: args.pop(k) for k in INJECTED if k in args}
    return step(request(**args), **injected)
