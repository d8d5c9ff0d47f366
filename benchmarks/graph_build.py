"""Time and memory of building the NeSCal neighbour graph, against one CE training epoch.

Builds cosine kNN graphs over clustered synthetic embeddings (50 Gaussian clusters,
256-d by default) with ``build_knn_graph`` — exact, approximate and auto — and times
one cross-entropy epoch of a 2 x 256 MLP on as many rows (batch 256), so the graph's
cost reads as a number of epochs. Every measurement runs in a fresh subprocess and
reports its peak resident memory (``resource.getrusage(...).ru_maxrss``; tracemalloc
misses numpy/torch buffers). The approximate method's numba JIT is timed apart:
``jit_s`` is its first call in the worker process (compiling, or loading the disk
cache), and a separate table times a first-ever process (empty cache) against a later
one.

Examples
--------
python benchmarks/graph_build.py --quick
python benchmarks/graph_build.py --sizes 10000 100000
python benchmarks/graph_build.py --sizes 1000000 --methods auto
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

N_CLUSTERS = 50


def clustered_embeddings(n: int, dim: int, seed: int, intrinsic_dim: int = 16):
    """``n`` float32 rows around ``N_CLUSTERS`` Gaussian centres, and their cluster labels.

    With ``intrinsic_dim > 0`` each cluster spreads along its own random
    ``intrinsic_dim``-dimensional subspace (plus a little isotropic noise), like
    the low-rank embeddings a trained network produces; ``intrinsic_dim=0`` gives
    full-rank isotropic clusters, on which nearest neighbours are close to ties in
    high dimension (the hard case for approximate search).
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((N_CLUSTERS, dim), dtype=np.float32)
    labels = rng.integers(0, N_CLUSTERS, n)
    data = centres[labels]
    noise = 0.8 if intrinsic_dim == 0 else 0.1
    for start in range(0, n, 65536):
        block = data[start : start + 65536]
        block += noise * rng.standard_normal(block.shape, dtype=np.float32)
    if intrinsic_dim:
        scale = 0.8 / np.sqrt(intrinsic_dim)
        for cluster in range(N_CLUSTERS):
            rows = np.flatnonzero(labels == cluster)
            basis = rng.standard_normal((intrinsic_dim, dim), dtype=np.float32) * scale
            latent = rng.standard_normal((len(rows), intrinsic_dim), dtype=np.float32)
            data[rows] += latent @ basis
    return data, labels


def _peak_rss_mb() -> float:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 2**20


def worker_graph(args) -> dict:
    from nescal_sklearn.graph import AUTO_EXACT_MAX_SAMPLES, build_knn_graph

    data, _ = clustered_embeddings(args.n, args.dim, args.seed, args.intrinsic_dim)
    resolved = args.method
    if resolved == "auto":
        resolved = "exact" if args.n <= AUTO_EXACT_MAX_SAMPLES else "approximate"
    jit_s = None
    if resolved == "approximate":
        warm, _ = clustered_embeddings(2000, args.dim, args.seed + 1, args.intrinsic_dim)
        start = time.perf_counter()
        build_knn_graph(warm, args.n_neighbors, method="approximate", random_state=0)
        jit_s = time.perf_counter() - start
    baseline = _peak_rss_mb()
    start = time.perf_counter()
    neighbors = build_knn_graph(data, args.n_neighbors, method=args.method, random_state=0)
    seconds = time.perf_counter() - start
    peak = _peak_rss_mb()
    if args.save:
        np.save(args.save, neighbors)
    return {
        "resolved": resolved,
        "seconds": seconds,
        "jit_s": jit_s,
        "peak_mb": peak,
        "baseline_mb": baseline,
    }


def worker_epoch(args) -> dict:
    import torch

    data, labels = clustered_embeddings(args.n, args.dim, args.seed, args.intrinsic_dim)
    x, y = torch.from_numpy(data), torch.from_numpy(labels)
    torch.manual_seed(args.seed)
    nn = torch.nn
    model = nn.Sequential(
        nn.Linear(args.dim, 256),
        nn.ReLU(),
        nn.Linear(256, 256),
        nn.ReLU(),
        nn.Linear(256, N_CLUSTERS),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(batch):
        optimizer.zero_grad()
        loss = loss_fn(model(x[batch]), y[batch])
        loss.backward()
        optimizer.step()

    step(torch.arange(min(256, args.n)))  # warm-up: allocator, kernels
    start = time.perf_counter()
    for batch in torch.randperm(args.n).split(256):
        step(batch)
    return {"seconds": time.perf_counter() - start, "peak_mb": _peak_rss_mb()}


def worker_jit(args) -> dict:
    start = time.perf_counter()
    from nescal_sklearn.graph import build_knn_graph

    data, _ = clustered_embeddings(2000, args.dim, args.seed, args.intrinsic_dim)
    imported = time.perf_counter()
    build_knn_graph(data, args.n_neighbors, method="approximate", random_state=0)
    return {"seconds": time.perf_counter() - imported, "import_s": imported - start}


WORKERS = {"graph": worker_graph, "epoch": worker_epoch, "jit": worker_jit}


def run_worker(kind: str, args, timeout: float, env: dict | None = None, **extra) -> dict:
    if args.quick:  # in-process: one interpreter start; peak memory is then cumulative
        return WORKERS[kind](argparse.Namespace(**{**vars(args), **extra}))
    options = {
        k: getattr(args, k) for k in ("dim", "n_neighbors", "seed", "intrinsic_dim", "threads")
    }
    command = [sys.executable, os.path.abspath(__file__), "--worker", kind]
    for key, value in {**options, **extra}.items():
        if value is not None and (key != "threads" or value):
            command += [f"--{key.replace('_', '-')}", str(value)]
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f}s"}
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-1:] or ["?"]
        return {"error": f"exit {result.returncode}: {tail[0]}"}
    return json.loads(result.stdout.strip().splitlines()[-1])


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def recall(found: np.ndarray, reference: np.ndarray) -> float:
    k = reference.shape[1]
    hits = sum(len(set(a) & set(b)) for a, b in zip(found, reference, strict=True))
    return hits / (k * len(reference))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument(
        "--intrinsic-dim",
        type=int,
        default=16,
        help="per-cluster subspace dimension; 0 = isotropic full-rank clusters",
    )
    parser.add_argument("--n-neighbors", type=int, default=10)
    methods = ["exact", "approximate", "auto"]
    parser.add_argument("--methods", nargs="+", default=methods, choices=methods)
    parser.add_argument(
        "--max-exact", type=int, default=200_000, help="skip method='exact' above this size"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per measurement")
    parser.add_argument(
        "--no-cold-jit", action="store_true", help="skip the first-ever vs later JIT table"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 2000 x 32, exact and auto, in one process (cumulative peak memory)",
    )
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--save", help=argparse.SUPPRESS)
    parser.add_argument(
        "--threads",
        type=int,
        help="torch and numba threads in each measurement (default: all cores)",
    )
    args = parser.parse_args(argv)

    if args.threads:
        import numba
        import torch

        torch.set_num_threads(args.threads)
        numba.set_num_threads(args.threads)
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args)))
        return 0
    if args.quick:
        args.sizes, args.dim, args.methods, args.no_cold_jit = [2000], 32, ["exact", "auto"], True
        args.max_exact = max(args.sizes)

    print(
        f"dim={args.dim} intrinsic_dim={args.intrinsic_dim} k={args.n_neighbors} "
        f"clusters={N_CLUSTERS} cpus={os.cpu_count()}"
    )
    print(
        f"{'n':>9} {'method':>11} {'resolved':>11} {'graph_s':>8} {'jit_s':>6} "
        f"{'peak_MB':>8} {'added_MB':>8} {'recall':>6} {'epoch_s':>7} {'graph/epoch':>11}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            epoch_s = run_worker("epoch", args, args.timeout, n=n).get("seconds")
            exact_path = os.path.join(tmp, f"exact_{n}.npy")
            for method in args.methods:
                prefix = f"{n:>9} {method:>11}"
                if method == "exact" and n > args.max_exact:
                    print(f"{prefix} {'skipped: n > --max-exact (O(n^2) search)':>60}", flush=True)
                    continue
                path = os.path.join(tmp, f"{method}_{n}.npy")
                row = run_worker("graph", args, args.timeout, n=n, method=method, save=path)
                if "error" in row:
                    print(f"{prefix} {row['error']:>60}", flush=True)
                    continue
                rec = (
                    recall(np.load(path), np.load(exact_path))
                    if os.path.exists(exact_path)
                    else None
                )
                ratio = row["seconds"] / epoch_s if epoch_s else None
                print(
                    f"{prefix} {row['resolved']:>11} {row['seconds']:>8.2f} {_fmt(row['jit_s'], '6.1f'):>6} "
                    f"{row['peak_mb']:>8.0f} {row['peak_mb'] - row['baseline_mb']:>8.0f} {_fmt(rec, '6.3f'):>6} "
                    f"{_fmt(epoch_s, '7.2f'):>7} {_fmt(ratio, '11.2f'):>11}",
                    flush=True,
                )
    if not args.no_cold_jit:
        print("\nnumba JIT of method='approximate' (2000 rows), fresh processes:")
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache)
            on = {"NESCAL_SKLEARN_JIT_CACHE": "1"}
            for label, more in (
                ("first-ever (empty cache)", on),
                ("later process (warm cache)", on),
                ("later process, nescal cache off (the default)", {}),
            ):
                row = run_worker("jit", args, args.timeout, env={**env, **more})
                print(f"  {label:<34} {_fmt(row.get('seconds'), '6.1f')} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
