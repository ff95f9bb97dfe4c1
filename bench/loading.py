"""Reading real node dumps: wall time and peak memory of `tandem validate NODES` per size.

    python bench/loading.py                       # 5,000 and 50,000 nodes, YAML and JSON
    python bench/loading.py --sizes 5000 --formats yaml

The dump is shaped as `kubectl get nodes -o yaml|json` prints AKS nodes: 31 labels,
annotations, a `status.images` list of 50 images with their sizes, conditions,
addresses, capacity, nodeInfo, and `metadata.managedFields`; about 17 KB of YAML a node.
It is written once per size and format into a temporary folder (or --folder, kept for
the next run); each case runs the real CLI in a child process, whose peak resident
memory the operating system reports to this one (wait4). Prints one JSON object per case (nodes, format, bytes, seconds,
peak_mb, and the machine's one-minute load average before the case: other processes
sharing the CPU make `seconds` longer).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import yaml

DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # the same text, written faster

TOPOLOGY = {
    "apiVersion": "tandem.dev/v1alpha1",
    "kind": "ClusterTopology",
    "metadata": {"name": "default"},
    "spec": {
        "levels": [
            {"name": "zone", "nodeLabel": "topology.kubernetes.io/zone"},
            {"name": "host", "nodeLabel": "kubernetes.io/hostname"},
        ]
    },
}


def aks_node(i: int) -> dict[str, Any]:
    """One node as `kubectl get nodes -o yaml` shows an AKS GPU node."""
    name = f"aks-gpupool-{31337000 + i // 1000}-vmss{i:06x}"
    labels = {
        "agentpool": "gpupool",
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5",
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": "eastus",
        "failure-domain.beta.kubernetes.io/zone": f"eastus-{i % 3 + 1}",
        "kubernetes.azure.com/agentpool": "gpupool",
        "kubernetes.azure.com/cluster": "MC_rg_aks_eastus",
        "kubernetes.azure.com/consolidated-additional-properties": "a1b2c3d4-e5f6",
        "kubernetes.azure.com/kubelet-identity-client-id": "00000000-0000-0000-0000-000000000000",
        "kubernetes.azure.com/mode": "user",
        "kubernetes.azure.com/node-image-version": "AKSUbuntu-2204gen2containerd-202410.09.0",
        "kubernetes.azure.com/nodepool-type": "VirtualMachineScaleSets",
        "kubernetes.azure.com/os-sku": "Ubuntu",
        "kubernetes.azure.com/role": "agent",
        "kubernetes.azure.com/storageprofile": "managed",
        "kubernetes.azure.com/storagetier": "Premium_LRS",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/role": "agent",
        "node-role.kubernetes.io/agent": "",
        "node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "storageprofile": "managed",
        "storagetier": "Premium_LRS",
        "topology.disk.csi.azure.com/zone": f"eastus-{i % 3 + 1}",
        "topology.kubernetes.io/region": "eastus",
        "topology.kubernetes.io/zone": f"eastus-{i % 3 + 1}",
    }
    images = [
        {
            "names": [
                f"mcr.microsoft.com/oss/kubernetes/image-{k}@sha256:{(i * 131 + k * 7919) % 10**12:064x}",
                f"mcr.microsoft.com/oss/kubernetes/image-{k}:v1.{k}.{i % 9}",
            ],
            "sizeBytes": 10_000_000 + k * 1_234_567,
        }
        for k in range(50)
    ]
    conditions = [
        {
            "type": kind,
            "status": "False" if kind != "Ready" else "True",
            "reason": f"Kubelet{kind}",
            "message": f"kubelet reports {kind}",
            "lastHeartbeatTime": "2026-11-24T10:00:00Z",
            "lastTransitionTime": "2026-11-01T10:00:00Z",
        }
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"{i:08x}-0000-4000-8000-000000000000",
            "resourceVersion": str(1_000_000 + i),
            "creationTimestamp": "2026-11-01T10:00:00Z",
            "labels": labels,
            "annotations": {
                "csi.volume.kubernetes.io/nodeid": json.dumps({"disk.csi.azure.com": name, "file.csi.azure.com": name}),
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "managedFields": [
                {
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {f"f:{key}": {} for key in list(labels)[:12]}}},
                    "manager": manager,
                    "operation": "Update",
                    "time": "2026-11-24T10:00:00Z",
                }
                for manager in ("kubelet", "cloud-node-manager", "kube-controller-manager")
            ],
        },
        "spec": {"providerID": f"azure:///subscriptions/x/resourceGroups/y/providers/vmss/{name}", "podCIDR": f"127.{i // 65536 % 256}.{i // 256 % 256}.0/24"},
        "status": {
            "addresses": [{"type": "InternalIP", "address": f"127.224.{i // 256 % 256}.{i % 256}"}, {"type": "Hostname", "address": name}],
            "allocatable": {"cpu": "94", "ephemeral-storage": "1000Gi", "memory": "1800Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "capacity": {"cpu": "96", "ephemeral-storage": "1100Gi", "memory": "1900Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"{i:032x}",
                "containerRuntimeVersion": "containerd://1.7.22-1",
                "kernelVersion": "5.15.0-1073-azure",
                "kubeProxyVersion": "v1.31.2",
                "kubeletVersion": "v1.31.2",
                "machineID": f"{i:032x}",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.5 LTS",
                "systemUUID": f"{i:08x}-0000-0000-0000-000000000000",
            },
        },
    }


def write_dump(folder: Path, nodes: int, fmt: str) -> Path:
    """`kubectl get nodes -o yaml|json` of `nodes` AKS nodes, plus the topology file."""
    path = folder / f"nodes-{nodes}.{fmt}"
    if path.exists():
        return path
    partial = path.with_name(path.name + ".partial")  # a dump cut short by ^C is never taken for whole
    with partial.open("w", encoding="utf-8") as out:
        # One item at a time, as kubectl lays it out: the dump of 50,000 nodes never sits in memory.
        if fmt == "json":
            out.write('{\n    "apiVersion": "v1",\n    "items": [\n')
            for i in range(nodes):
                out.write((",\n" if i else "") + textwrap.indent(json.dumps(aks_node(i), indent=4), " " * 8))
            out.write('\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n')
        else:
            out.write("apiVersion: v1\nitems:\n")
            for i in range(nodes):
                out.write(yaml.dump([aks_node(i)], Dumper=DUMPER, sort_keys=True, width=10**6))
            out.write('kind: List\nmetadata:\n  resourceVersion: ""\n')
    partial.rename(path)
    return path


def measure(path: Path, topology: Path) -> tuple[float, float]:
    """(seconds, peak MB) of `tandem validate NODES TOPOLOGY` in a fresh child process,
    its peak resident memory as the operating system counted it for that child alone."""
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "tandem.cli.main", "validate", str(path), str(topology)], stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"tandem validate failed: {errors.read().decode(errors='replace').strip()}")
    return seconds, usage.ru_maxrss / 1024  # KB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,50000")
    parser.add_argument("--formats", default="yaml,json")
    parser.add_argument("--folder", type=Path, default=None, help="keep the dumps here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.folder or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        topology = folder / "topology.yaml"
        topology.write_text(yaml.safe_dump(TOPOLOGY), encoding="utf-8")
        for nodes in (int(n) for n in args.sizes.split(",")):
            for fmt in args.formats.split(","):
                path = write_dump(folder, nodes, fmt)
                load = os.getloadavg()[0]
                seconds, peak = measure(path, topology)
                case = {"nodes": nodes, "format": fmt, "bytes": path.stat().st_size, "seconds": round(seconds, 2), "peak_mb": round(peak)}
                print(json.dumps(case | {"load": round(load, 2)}), flush=True)


if __name__ == "__main__":
    main()
