#!/usr/bin/env python3
"""Real Envoy routers against meshpilot and the real istiod in one run (issue 22's side-by-side figure).

ENVOYS real Envoy 1.40 routers (Istio node type `router`, namespace istio-system, no Gateway selects
them, so the figure is CDS and EDS) connect to one control plane over SotW or Delta ADS; the config is
`xds-load gen`'s mesh (SERVICES ServiceEntries in 10 namespaces, their WorkloadEntries, VirtualServices).
Once every Envoy has warmed all its clusters, one new ServiceEntry (STATIC, one endpoint) is written
into the config directory (atomic rename); an Envoy has converged when it logs that the new cluster
finished warming (`warming cluster … complete`, i.e. its ClusterLoadAssignment arrived; Envoy's own
timestamp, `--log-format '%E.%e %v'`): the time from the rename to that is the Envoy's convergence. CHANGES new ServiceEntries per run, one after another.

For each protocol and run the control planes alternate (istiod, then meshpilot), each fresh on a fresh
copy of the config: istiod (`pilot-discovery` cached by scripts/istio-peer.sh, `--configDir`, with the
settings upstream Envoy needs: PILOT_ENABLE_METADATA_EXCHANGE=false, PILOT_ENABLE_ALPN_FILTER=false,
mesh `enableAutoMtls: false`; a private kube-testenv because istiod needs an API server) and meshpilot
(`meshpilot discovery --config-dir`). Reported per protocol: all-Envoys-converged time (median over
runs and changes, and max), per-Envoy p50, control plane RSS after the changes, and the ratio.

Usage (from the repository root):
    scripts/bench/envoy-routers.py [--envoys 20] [--services 1000] [--runs 3] [--changes 3]
        [--protocols sotw,delta] [--out target/bench/envoy-routers] [--meshpilot BIN] [--xds-load BIN]
        [--no-istiod]
Release binaries are built if missing; Envoy is installed by scripts/install-envoy.sh.
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISTIOD_PORT_BASE = 26000
POLL_PAUSE_S = 0.01


def log(msg):
    print(msg, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bootstrap(i, xds_port, protocol):
    """An Envoy router's bootstrap: ADS to the control plane over HTTP/2 (as crates/testing's)."""
    return {
        "node": {
            "id": f"router~127.0.0.1~router-{i}.istio-system~istio-system.svc.cluster.local",
            "cluster": "router.istio-system",
            "metadata": {"NAMESPACE": "istio-system", "CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.28.0",
                         "LABELS": {"app": "bench-router"}},
        },
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "dynamic_resources": {
            "ads_config": {
                "api_type": "DELTA_GRPC" if protocol == "delta" else "GRPC",
                "transport_api_version": "V3",
                "set_node_on_first_message_only": True,
                "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"}}],
            },
            "cds_config": {"ads": {}, "resource_api_version": "V3"},
            "lds_config": {"ads": {}, "resource_api_version": "V3"},
        },
        "static_resources": {"clusters": [{
            "name": "xds-grpc", "type": "STATIC", "connect_timeout": "1s",
            "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}}}},
            "load_assignment": {"cluster_name": "xds-grpc", "endpoints": [{"lb_endpoints": [{"endpoint": {
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": xds_port}}}}]}]},
        }]},
    }


class Envoys:
    """ENVOYS Envoy processes with persistent admin connections; all killed by stop()."""

    def __init__(self, envoy_bin, n, xds_port, protocol, workdir):
        self.procs, self.admin, self.conns, self.logs = [], [], [], []
        os.makedirs(workdir, exist_ok=True)
        for i in range(n):
            path = os.path.join(workdir, f"admin-{i}")
            if os.path.exists(path):
                os.remove(path)
            self.logs.append(os.path.join(workdir, f"envoy-{i}.log"))
            logf = open(self.logs[-1], "w")
            p = subprocess.Popen(
                [envoy_bin, "--config-yaml", json.dumps(bootstrap(i, xds_port, protocol)), "--concurrency", "1",
                 "--disable-hot-restart", "--base-id", str(os.getpid() % 10000 * 100 + i),
                 "--admin-address-path", path, "--log-level", "warning",
                 # Envoy's own record of when a cluster finished warming, with epoch time in ms.
                 "--component-log-level", "upstream:debug", "--log-format", "%E.%e %v"],
                stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
            self.procs.append((p, path))
        try:
            for p, path in self.procs:
                deadline = time.time() + 30
                while not (os.path.exists(path) and open(path).read().strip()):
                    if p.poll() is not None or time.time() > deadline:
                        raise RuntimeError(f"envoy did not start; see {workdir}")
                    time.sleep(0.05)
                host, port = open(path).read().strip().rsplit(":", 1)
                self.admin.append((host, int(port)))
                self.conns.append(http.client.HTTPConnection(host, int(port), timeout=10))
        except BaseException:
            self.stop()
            raise

    def stats(self, i, pattern):
        """The admin /stats counters and gauges whose name matches `pattern` (a regex), as a dict."""
        for _ in range(2):
            try:
                c = self.conns[i]
                c.request("GET", "/stats?filter=" + pattern)
                body = c.getresponse().read().decode()
                out = {}
                for line in body.splitlines():
                    name, _, value = line.rpartition(": ")
                    if name and value.isdigit():
                        out[name] = int(value)
                return out
            except (OSError, http.client.HTTPException):
                self.conns[i] = http.client.HTTPConnection(*self.admin[i], timeout=10)
        return {}

    def stop(self):
        for p, _ in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def wait_warm(envoys, services, timeout_s):
    """Waits until every Envoy has at least `services` active clusters and none warming."""
    deadline = time.time() + timeout_s
    pending = set(range(len(envoys.procs)))
    while pending:
        for i in list(pending):
            s = envoys.stats(i, r"cluster_manager\.(active|warming)_clusters$")
            if s.get("cluster_manager.active_clusters", 0) >= services and s.get("cluster_manager.warming_clusters", 1) == 0:
                pending.discard(i)
        if time.time() > deadline:
            raise RuntimeError(f"{len(pending)} Envoys not warm after {timeout_s} s")
        time.sleep(0.2)


def new_service_entry(config, tag):
    """Writes ServiceEntry bench-<tag> in ns-0 (atomic rename); returns its host."""
    host = f"bench-{tag}.ns-0.svc.cluster.local"
    n = sum(ord(c) for c in tag) % 250 + 1
    doc = f"""apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: bench-{tag}
  namespace: ns-0
spec:
  hosts: [{host}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports:
  - {{name: http, number: 80, protocol: HTTP}}
  endpoints:
  - address: 10.250.0.{n}
"""
    tmp = os.path.join(config, f".bench-{tag}.yaml.tmp")
    with open(tmp, "w") as f:
        f.write(doc)
    os.rename(tmp, os.path.join(config, f"bench-{tag}.yaml"))
    return host


def wait_cluster(envoys, host, t0, timeout_s):
    """Seconds from t0 (epoch) until each Envoy logged `warming cluster <new cluster> complete` (its
    ClusterLoadAssignment arrived), read from Envoy's own log: polling the admin endpoint instead would
    cost each Envoy a scan of every cluster's stats per poll, which slows the very thing measured."""
    needle = f"warming cluster outbound|80||{host} complete"
    done = {}
    offsets = [0] * len(envoys.logs)
    deadline = time.time() + timeout_s
    while len(done) < len(envoys.logs):
        for i, path in enumerate(envoys.logs):
            if i in done:
                continue
            with open(path, errors="replace") as f:
                f.seek(offsets[i])
                chunk = f.read()
            # Only whole lines; a partial last line is read again next time.
            whole = chunk[: chunk.rfind("\n") + 1]
            offsets[i] += len(whole.encode())
            for line in whole.splitlines():
                if needle in line:
                    done[i] = float(line.split(" ", 1)[0]) - t0
                    break
        if time.time() > deadline:
            raise RuntimeError(f"{len(envoys.logs) - len(done)} Envoys did not warm {host} in {timeout_s} s")
        time.sleep(POLL_PAUSE_S)
    return [done[i] for i in sorted(done)]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def start_meshpilot(args, config, outdir, n):
    grpc, http_port = free_port(), free_port()
    logf = open(os.path.join(outdir, f"meshpilot-{n}.log"), "w")
    p = subprocess.Popen([args.meshpilot, "discovery", "--config-dir", config, "--grpc-addr", f"127.0.0.1:{grpc}",
                          "--http-addr", f"127.0.0.1:{http_port}", "--monitoring-addr", "127.0.0.1:0"],
                         stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 60
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=2)
            c.request("GET", "/ready")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        if p.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"meshpilot not ready; see {outdir}/meshpilot-{n}.log")
        time.sleep(0.1)

    def stop():
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    return p.pid, grpc, stop


def start_istiod(args, config, outdir, n, kubeconfig):
    idir = os.path.join(outdir, "istiod-run")
    shutil.rmtree(idir, ignore_errors=True)
    os.makedirs(idir)
    with open(os.path.join(idir, "mesh.yaml"), "w") as f:
        f.write("trustDomain: cluster.local\nenableAutoMtls: false\n")
    env = dict(os.environ, ISTIOD_ARGS=f"--configDir {config}", PILOT_ENABLE_METADATA_EXCHANGE="false",
               PILOT_ENABLE_ALPN_FILTER="false", PILOT_MAX_REQUESTS_PER_SECOND="10000")
    run = os.path.join(ROOT, "scripts/peer/run-istiod.sh")
    subprocess.run([run, "start", idir, kubeconfig, str(ISTIOD_PORT_BASE)], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=open(os.path.join(outdir, f"istiod-start-{n}.log"), "w"))
    pid = int(open(os.path.join(idir, "istiod.pid")).read())

    def stop():
        subprocess.run([run, "stop", idir], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.copy(os.path.join(idir, "istiod.log"), os.path.join(outdir, f"istiod-{n}.log"))
    return pid, ISTIOD_PORT_BASE + 10, stop


def one_run(args, envoy_bin, plane, protocol, n, kubeconfig):
    outdir = os.path.join(args.out, protocol, plane)
    os.makedirs(outdir, exist_ok=True)
    config = os.path.join(args.out, "config")
    shutil.rmtree(config, ignore_errors=True)
    shutil.copytree(os.path.join(args.out, "config.orig"), config)
    if plane == "istiod":
        pid, port, stop_plane = start_istiod(args, config, outdir, n, kubeconfig)
    else:
        pid, port, stop_plane = start_meshpilot(args, config, outdir, n)
    envoys = None
    try:
        envoys = Envoys(envoy_bin, args.envoys, port, protocol, os.path.join(outdir, f"envoys-{n}"))
        wait_warm(envoys, args.services, 300)
        time.sleep(1)
        results = []
        for c in range(args.changes):
            t0 = time.time()
            host = new_service_entry(config, f"{protocol}-{plane}-{n}-{c}")
            times = wait_cluster(envoys, host, t0, 60)
            results.append(times)
            log(f"  {protocol} {plane} run {n} change {c + 1}: all {len(times)} Envoys warm after "
                f"{max(times) * 1000:.0f} ms (p50 {statistics.median(times) * 1000:.0f} ms)")
            time.sleep(1)
        rss = rss_mib(pid)
    finally:
        if envoys:
            envoys.stop()
        stop_plane()
    return {"changes": results, "rss_mib": rss}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envoys", type=int, default=20)
    ap.add_argument("--services", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--changes", type=int, default=3)
    ap.add_argument("--protocols", default="sotw,delta")
    ap.add_argument("--out", default=os.path.join(ROOT, "target/bench/envoy-routers"))
    ap.add_argument("--meshpilot", default=os.path.join(ROOT, "target/release/meshpilot"))
    ap.add_argument("--xds-load", default=os.path.join(ROOT, "target/release/xds-load"))
    ap.add_argument("--no-istiod", action="store_true", help="meshpilot only (no API server, no istiod)")
    args = ap.parse_args()
    # A TERM (timeout, kill) unwinds like an error, so the Envoys and control planes are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not (os.access(args.meshpilot, os.X_OK) and os.access(args.xds_load, os.X_OK)):
        subprocess.run(["cargo", "build", "--release", "-p", "meshpilot", "-p", "xds-load"], cwd=ROOT, check=True)
    envoy_bin = subprocess.run([os.path.join(ROOT, "scripts/install-envoy.sh")], check=True,
                               capture_output=True, text=True).stdout.strip()
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    subprocess.run([args.xds_load, "gen", "--out", os.path.join(args.out, "config.orig"), "--services",
                    str(args.services), "--workloads", str(args.services), "--namespaces", "10"],
                   check=True, stdout=subprocess.DEVNULL)
    planes = ["meshpilot"] if args.no_istiod else ["istiod", "meshpilot"]
    kube = os.path.join(args.out, "kube")
    kubeconfig = os.path.join(kube, "kubeconfig")
    testenv = os.path.join(ROOT, "scripts/kube-testenv.sh")
    if not args.no_istiod:
        subprocess.run([testenv, "start", kube], check=True, stdout=subprocess.DEVNULL,
                       stderr=open(os.path.join(args.out, "kube-testenv.log"), "w"))
    log(f"machine: {os.cpu_count()} CPU, load {open('/proc/loadavg').read().split()[:3]}; "
        f"{args.envoys} Envoy routers, {args.services} services, {args.changes} new ServiceEntries per run")
    summary = {}
    try:
        for protocol in args.protocols.split(","):
            for n in range(1, args.runs + 1):
                for plane in planes:
                    r = one_run(args, envoy_bin, plane, protocol, n, kubeconfig)
                    summary.setdefault(protocol, {}).setdefault(plane, []).append(r)
    finally:
        if not args.no_istiod:
            subprocess.run([testenv, "stop", kube], check=False, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    for protocol, by_plane in summary.items():
        log(f"\n### {protocol}: one new ServiceEntry until all {args.envoys} Envoys have it warm")
        log("| figure | " + " | ".join(planes) + (" | ratio (istiod / meshpilot) |" if len(planes) == 2 else " |"))
        log("|---|" + "---|" * (len(planes) + (1 if len(planes) == 2 else 0)))
        rows = {
            "all warm, median over changes (ms)": lambda rs: statistics.median(
                max(t) for r in rs for t in r["changes"]) * 1000,
            "all warm, max (ms)": lambda rs: max(max(t) for r in rs for t in r["changes"]) * 1000,
            "per Envoy p50 (ms)": lambda rs: statistics.median(x for r in rs for t in r["changes"] for x in t) * 1000,
            "RSS after the changes (MiB, median of runs)": lambda rs: statistics.median(r["rss_mib"] for r in rs),
        }
        for name, f in rows.items():
            vals = [f(by_plane[p]) for p in planes]
            ratio = f" {vals[0] / vals[1]:.2f} |" if len(vals) == 2 and vals[1] else ""
            log(f"| {name} | " + " | ".join(f"{v:.1f}" for v in vals) + " |" + ratio)


if __name__ == "__main__":
    sys.exit(main())
