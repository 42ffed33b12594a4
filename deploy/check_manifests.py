#!/usr/bin/env python3
"""Static checks of deploy/: every YAML file parses, the Kubernetes objects fit together
(names referenced exist, the StatefulSet has one replica per worker of the cluster file and
each worker's address is its pod's name under the headless Service), and the seccomp profile
parses and allows the three io_uring calls. Prints what it checked; exits 1 on a mismatch,
2 when PyYAML is missing (check.sh prints that as a skip)."""

import json
import pathlib
import sys

try:
    import tomllib  # Python >= 3.11
except ImportError:
    tomllib = None

try:
    import yaml
except ImportError:
    print("skip: PyYAML is not installed (pip install pyyaml)")
    sys.exit(2)

DEPLOY = pathlib.Path(__file__).resolve().parent
IO_URING = {"io_uring_setup", "io_uring_enter", "io_uring_register"}


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def load_objects():
    objects = []
    for path in sorted(DEPLOY.rglob("*.yaml")) + sorted(DEPLOY.rglob("*.yml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        print(f"ok: {path.relative_to(DEPLOY)} parses ({len(docs)} document(s))")
        objects += [(path.name, d) for d in docs]
    return objects


def one(objects, kind):
    found = [d for _, d in objects if d.get("kind") == kind]
    if len(found) != 1:
        fail(f"expected one {kind}, found {len(found)}")
    return found[0]


def pod_refs(pod_spec):
    """The ConfigMaps and Secrets a pod's volumes name."""
    maps = {v["configMap"]["name"] for v in pod_spec.get("volumes", []) if "configMap" in v}
    secrets = {v["secret"]["secretName"] for v in pod_spec.get("volumes", []) if "secret" in v}
    return maps, secrets


def check_objects(objects):
    secret = one(objects, "Secret")
    config = one(objects, "ConfigMap")
    service = one(objects, "Service")
    workers = one(objects, "StatefulSet")
    job = one(objects, "Job")
    if service["spec"].get("clusterIP") != "None":
        fail("the workers' Service must be headless (clusterIP: None)")
    if workers["spec"]["serviceName"] != service["metadata"]["name"]:
        fail("the StatefulSet's serviceName is not the headless Service")
    for owner, spec in [("StatefulSet", workers["spec"]["template"]["spec"]),
                        ("Job", job["spec"]["template"]["spec"])]:
        maps, secrets = pod_refs(spec)
        if maps != {config["metadata"]["name"]} or secrets != {secret["metadata"]["name"]}:
            fail(f"the {owner} mounts {maps} and {secrets}, not the ConfigMap and Secret here")
        if spec["securityContext"].get("runAsNonRoot") is not True:
            fail(f"the {owner} does not run as non-root")
    if tomllib is None:
        print("skip: the cluster file against the StatefulSet (needs Python >= 3.11's tomllib)")
        return
    cluster = tomllib.loads(config["data"]["cluster.toml"])
    tomllib.loads(config["data"]["run.toml"])
    entries = cluster["worker"]
    if workers["spec"]["replicas"] != len(entries):
        fail(f"{workers['spec']['replicas']} replicas but {len(entries)} workers in cluster.toml")
    name, svc = workers["metadata"]["name"], service["metadata"]["name"]
    for k, entry in enumerate(entries):
        want = f"{name}-{k}.{svc}:"
        if entry["id"] != k + 1 or not entry["address"].startswith(want):
            fail(f"cluster.toml worker {entry}: pod {name}-{k} is id {k + 1} at {want}PORT")
    print(f"ok: Secret, ConfigMap, headless Service, StatefulSet ({len(entries)} workers "
          "matching cluster.toml) and Job fit together")


def check_seccomp():
    path = DEPLOY / "seccomp-io-uring.json"
    profile = json.loads(path.read_text())
    allowed = set()
    for rule in profile["syscalls"]:
        if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args") and not rule.get(
                "includes") and not rule.get("excludes"):
            allowed |= set(rule["names"])
    if profile["defaultAction"] != "SCMP_ACT_ERRNO":
        fail("the seccomp profile must refuse what it does not list")
    missing = IO_URING - allowed
    if missing:
        fail(f"the seccomp profile does not allow {sorted(missing)}")
    print(f"ok: {path.name} parses; {len(allowed)} calls allowed unconditionally, "
          "io_uring_setup/enter/register among them")


def main():
    check_objects(load_objects())
    check_seccomp()


if __name__ == "__main__":
    main()
