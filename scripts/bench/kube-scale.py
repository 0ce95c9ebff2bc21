#!/usr/bin/env python3
"""Kubernetes objects for scripts/bench/kube-scale.sh, written straight to a kube-testenv API server
(no kubelet, no controllers: this plays both, as the peer tests do).

  kube-scale.py populate --kube DIR --pods N --services S --namespaces K --restart R --deployments D
                         [--config-dir C]
      N - R pods over S - D services in xds-load's layout: Service svc-<s> (ns-<s mod K>, port http
      80 -> 8080, selector app: svc-<s>) and Pods svc-<s>-<j> (s = j mod (S - D)) at the layout's IP
      of j (10.<1+j/62500>.<(j/250) mod 250>.<1+j mod 250>); and D deployments of R / D pods each:
      Service deploy-<d> (ns-<d mod K>) and Pods deploy-<d>-<i> at 10.254.<(k/250) mod 250>.<1+k mod
      250>, k = d * R/D + i. Every pod gets status.podIP and Ready through the status subresource;
      every Service one EndpointSlice as the EndpointSlice controller writes it. With --config-dir,
      writes xds-load's layout (.xds-load.json) there, so `xds-load run` simulates the svc pods'
      sidecars.

  kube-scale.py restart --kube DIR --restart R --deployments D --namespaces K
      The `xds-load run --change command` helper: reads a change number a line; change 0 is the
      populated state; change q (1 .. R) replaces the next original pod of deployment (q-1) mod D, in
      Kubernetes' order (maxSurge 1, maxUnavailable 0): a new pod at xds-load's marker IP of q
      (10.255.<(q/250) mod 250>.<1+q mod 250>) is created, gets its IP and Ready, and its ready endpoint
      is added to the slice (then "ok" is answered: the marker is in the API server); then the old pod
      terminates (deletionTimestamp, not ready, slice endpoint terminating) and is removed (the Pod,
      then its slice endpoint). Exits at the end of input.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import sys
import time

import requests


def layout_ip(j):
    return f"10.{1 + j // 62500}.{(j // 250) % 250}.{1 + j % 250}"


def marker_ip(q):
    return f"10.255.{(q // 250) % 250}.{1 + q % 250}"


class Api:
    """The API server of a kube-testenv directory (admin token)."""

    def __init__(self, kube_dir):
        env = dict(
            line.strip().split("=", 1) for line in open(os.path.join(kube_dir, "env")) if "=" in line
        )
        self.server = env["KUBE_TESTENV_SERVER"]
        token = open(os.path.join(kube_dir, "admin.token")).read().strip()
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        # Passed on each request: a session's own `verify` loses to REQUESTS_CA_BUNDLE.
        self.ca = os.path.join(kube_dir, "pki", "ca.crt")
        adapter = requests.adapters.HTTPAdapter(pool_connections=16, pool_maxsize=16)
        self.session.mount("https://", adapter)

    def call(self, method, path, body=None, content_type="application/json", ok=(200, 201, 202)):
        r = self.session.request(
            method, self.server + path, data=None if body is None else json.dumps(body),
            headers={"Content-Type": content_type}, verify=self.ca,
        )
        if r.status_code not in ok:
            raise RuntimeError(f"{method} {path}: {r.status_code} {r.text[:300]}")
        return r.json() if r.content else None

    def create(self, path, body):
        return self.call("POST", path, body, ok=(200, 201, 202, 409))

    def patch(self, path, body):
        return self.call("PATCH", path, body, content_type="application/merge-patch+json")


def pod_manifest(ns, name, app):
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app, "version": "v1"}},
        # A node name: deletion is graceful (deletionTimestamp) until "the kubelet" removes the pod.
        "spec": {"nodeName": "bench-node", "serviceAccountName": app, "automountServiceAccountToken": False,
                 "containers": [{"name": "app", "image": "example.invalid/app",
                                 "ports": [{"name": "http", "containerPort": 8080}]}]},
    }


def pod_status(ip, ready):
    return {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def slice_endpoint(ns, pod, ip, ready=True, serving=True, terminating=False):
    return {"addresses": [ip], "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
            "nodeName": "bench-node", "targetRef": {"kind": "Pod", "namespace": ns, "name": pod}}


def slice_manifest(ns, service, endpoints):
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{service}-bench", "namespace": ns,
                     "labels": {"kubernetes.io/service-name": service,
                                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    }


def namespace_of(s, namespaces):
    return f"ns-{s % namespaces}"


def deploy_ip(k):
    return f"10.254.{(k // 250) % 250}.{1 + k % 250}"


def deployment_pods(d, a):
    """The original pods of deployment d: (name, IP)."""
    per = a.restart // a.deployments
    return [(f"deploy-{d}-{i}", deploy_ip(d * per + i)) for i in range(per)]


def populate(a):
    api = Api(a.kube)
    t0 = time.time()
    services, pods = a.services - a.deployments, a.pods - a.restart
    if services < 1 or pods < 0 or a.restart % a.deployments:
        sys.exit("kube-scale: need services > deployments, pods >= restart, restart a multiple of deployments")
    for k in range(a.namespaces):
        api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{k}"}})
    # (namespace, service) -> [(pod, IP)]
    members = collections.defaultdict(list)
    for j in range(pods):
        s = j % services
        members[(namespace_of(s, a.namespaces), f"svc-{s}")].append((f"svc-{s}-{j}", layout_ip(j)))
    for s in range(services):
        members.setdefault((namespace_of(s, a.namespaces), f"svc-{s}"), [])
    for d in range(a.deployments):
        members[(namespace_of(d, a.namespaces), f"deploy-{d}")] = deployment_pods(d, a)

    def service(key):
        ns, name = key
        api.create(f"/api/v1/namespaces/{ns}/services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        })

    def pod(item):
        (ns, app), name, ip = item
        api.create(f"/api/v1/namespaces/{ns}/pods", pod_manifest(ns, name, app))
        api.patch(f"/api/v1/namespaces/{ns}/pods/{name}/status", pod_status(ip, True))

    def endpoint_slice(key):
        ns, name = key
        eps = [slice_endpoint(ns, p, ip) for p, ip in members[key]]
        api.create(f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", slice_manifest(ns, name, eps))

    items = [(key, p, ip) for key, ps in members.items() for p, ip in ps]
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.workers) as pool:
        list(pool.map(service, members))
        list(pool.map(pod, items))
        list(pool.map(endpoint_slice, members))
    print(f"kube-scale: {len(members)} services, {len(items)} pods, {len(members)} EndpointSlices in "
          f"{time.time() - t0:.1f} s", file=sys.stderr)
    if a.config_dir:
        os.makedirs(a.config_dir, exist_ok=True)
        with open(os.path.join(a.config_dir, ".xds-load.json"), "w") as f:
            json.dump({"services": services, "namespaces": a.namespaces, "workloads": pods,
                       "sidecar_scope": False, "virtual_services": False, "domain": "cluster.local"}, f)


def restart(a):
    api = Api(a.kube)
    # Per deployment: its pods oldest first, and its slice's endpoints.
    pods, endpoints = {}, {}
    for d in range(a.deployments):
        ns = namespace_of(d, a.namespaces)
        pods[d] = collections.deque(deployment_pods(d, a))
        endpoints[d] = [slice_endpoint(ns, p, ip) for p, ip in pods[d]]
    for line in sys.stdin:
        q = int(line)
        if q == 0:
            print("ok", flush=True)
            continue
        d = (q - 1) % a.deployments
        ns, app = namespace_of(d, a.namespaces), f"deploy-{d}"
        base = f"/api/v1/namespaces/{ns}/pods"
        slice_path = f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices/{app}-bench"
        new, ip = f"{app}-r{q}", marker_ip(q)
        try:
            # The new pod: created, running, ready; the controller adds its ready endpoint.
            api.create(base, pod_manifest(ns, new, app))
            api.patch(f"{base}/{new}/status", pod_status(ip, True))
            endpoints[d].append(slice_endpoint(ns, new, ip))
            api.patch(slice_path, {"endpoints": endpoints[d]})
            print("ok", flush=True)
            # The oldest pod terminates, then goes.
            old, old_ip = pods[d].popleft()
            pods[d].append((new, ip))
            api.call("DELETE", f"{base}/{old}")
            api.patch(f"{base}/{old}/status", pod_status(old_ip, False))
            for e in endpoints[d]:
                if e["targetRef"]["name"] == old:
                    e["conditions"] = {"ready": False, "serving": False, "terminating": True}
            api.patch(slice_path, {"endpoints": endpoints[d]})
            force = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
            api.call("DELETE", f"{base}/{old}", force, ok=(200, 202, 404))
            endpoints[d] = [e for e in endpoints[d] if e["targetRef"]["name"] != old]
            api.patch(slice_path, {"endpoints": endpoints[d]})
        except Exception as e:  # the harness reports it as the change's error
            print(f"error: {e}".replace("\n", " "), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("populate", "restart"):
        c = sub.add_parser(name)
        c.add_argument("--kube", required=True, help="kube-testenv directory")
        c.add_argument("--namespaces", type=int, default=50)
        c.add_argument("--restart", type=int, default=2000, help="pods restarted (R)")
        c.add_argument("--deployments", type=int, default=20, help="deployments they belong to (D)")
    populate_args = sub.choices["populate"]
    populate_args.add_argument("--pods", type=int, default=10000)
    populate_args.add_argument("--services", type=int, default=500)
    populate_args.add_argument("--config-dir")
    populate_args.add_argument("--workers", type=int, default=8)
    a = p.parse_args()
    if a.cmd == "populate":
        populate(a)
    else:
        restart(a)


if __name__ == "__main__":
    main()
