#!/usr/bin/env python3
"""Compare tilefuse's GPU throughput suite with PyTorch eager and torch.compile.

Runs the GPU pipelines of BENCHMARKS.md (chain, bias_gelu, bias_gelu_bf16,
softmax, rmsnorm, layernorm, mse, sum, colsum at the GPU shapes) through
PyTorch eager and torch.compile, and prints them next to tilefuse's figures
as % of the device-to-device copy bandwidth measured in the same process.

How it measures:
- Copy bandwidth: a 1 GiB ``Tensor.copy_`` on the device; bytes read plus
  bytes written over the median time.
- Each pipeline: random inputs (never zeros); eager and compiled results
  checked against the same math in float64 before any timing; warm-up, then
  the median of ``--reps`` (at least 50) repetitions timed with CUDA events.
  Working sets are 256 MiB or more per operand, several times the L2.
- First call of torch.compile: wall time from the first call of a freshly
  compiled function to its synchronised result (the first pipeline's figure
  also includes Inductor's start-up). Inductor's on-disk caches are disabled
  unless ``--allow-cache`` is given, so the figure is a real compilation.
- Eager pipelines are written op by op from the table's math, as a user would
  write them, except softmax, which is ``torch.softmax``.

tilefuse JSON (``--tilefuse PATH``), as written by tilefuse's throughput
report::

    {
      "copy_gbps": float,          # copy bandwidth of that run, GB/s (r + w)
      "pipelines": [
        {
          "pipeline": str,         # an id of BENCHMARKS.md, e.g. "chain"
          "dtype": str,            # e.g. "f32", "bf16"
          "shape": str,            # e.g. "[16384, 4096]"
          "bytes": int,            # minimal bytes: inputs read + outputs written
          "time_ms": float,        # median time of a cached call
          "gbps": float,           # bytes / time
          "pct_copy": float,       # gbps / copy_gbps * 100
          "kernels": int,          # kernels launched per call
          "first_call_ms": float   # graph -> fusion -> PTX -> load -> result
        },
        ...
      ]
    }

``--json OUT`` writes torch's figures in the same shape: a top-level
``copy_gbps``, ``torch_version`` and ``device``, and ``pipelines`` entries with
``pipeline``, ``dtype``, ``shape``, ``bytes``, and for each of ``eager`` and
``compile`` the keys ``<mode>_ms``, ``<mode>_gbps`` and ``<mode>_pct_copy``,
plus ``compile_first_call_ms``.

Without torch or a CUDA device the script says so and exits 0. ``--selftest``
runs the table formatting on fabricated figures: a format check only, never
results.
"""

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time

# Every tilefuse pipeline entry must have these keys, of these types.
TILEFUSE_KEYS = {
    "pipeline": str,
    "dtype": str,
    "shape": str,
    "bytes": int,
    "time_ms": (int, float),
    "gbps": (int, float),
    "pct_copy": (int, float),
    "kernels": int,
    "first_call_ms": (int, float),
}

M, K = 16384, 4096
FLAT = 1 << 26
COPY_BYTES = 1 << 30
MIN_REPS = 50


def pipelines(torch):
    """The suite: (id, dtype name, shape text, minimal bytes, make inputs, function)."""
    F = torch.nn.functional

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, device="cuda", dtype=dtype)

    def chain(a, b, c):
        return torch.tanh(a * b + c) * torch.sigmoid(a) - torch.exp(-(b * b))

    def bias_gelu(x, bias):
        return F.gelu(x + bias, approximate="tanh")

    def rmsnorm(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w

    def layernorm(x, w, b):
        mu = x.mean(-1, keepdim=True)
        d = x - mu
        var = (d * d).mean(-1, keepdim=True)
        return d * torch.rsqrt(var + 1e-5) * w + b

    def mse(a, b):
        return ((a - b) ** 2).mean()

    mk, bf16 = f"[{M}, {K}]", torch.bfloat16
    flat = f"[{FLAT}]"
    return [
        ("chain", "f32", flat, 16 * FLAT, lambda: (randn(FLAT), randn(FLAT), randn(FLAT)), chain),
        ("bias_gelu", "f32", mk, 8 * M * K + 4 * K, lambda: (randn(M, K), randn(K)), bias_gelu),
        ("bias_gelu_bf16", "bf16", mk, 4 * M * K + 2 * K,
         lambda: (randn(M, K, dtype=bf16), randn(K, dtype=bf16)), bias_gelu),
        ("softmax", "f32", mk, 8 * M * K, lambda: (randn(M, K),), lambda x: torch.softmax(x, dim=-1)),
        ("rmsnorm", "f32", mk, 8 * M * K + 4 * K, lambda: (randn(M, K), randn(K)), rmsnorm),
        ("layernorm", "f32", mk, 8 * M * K + 8 * K, lambda: (randn(M, K), randn(K), randn(K)), layernorm),
        ("mse", "f32", flat, 8 * FLAT, lambda: (randn(FLAT), randn(FLAT)), mse),
        ("sum", "f32", flat, 4 * FLAT, lambda: (randn(FLAT),), lambda a: a.sum()),
        ("colsum", "f32", mk, 4 * M * K + 4 * K, lambda: (randn(M, K),), lambda x: x.sum(0)),
    ]


def median_ms(torch, fn, args, reps, warmup=5, sets=None):
    """The median time of `fn(*args)` in milliseconds, timed with CUDA events;
    with `sets` (a list of argument tuples) call i takes `sets[i % len(sets)]`."""
    sets = sets or [args]
    for i in range(warmup):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (start, end) in enumerate(events):
        start.record()
        fn(*sets[i % len(sets)])
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in events)


def copy_gbps(torch, reps):
    """Device-to-device copy bandwidth of a 1 GiB `copy_`, bytes read + written, in GB/s."""
    src = torch.randn(COPY_BYTES // 4, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(torch, dst.copy_, (src,), reps)
    return 2 * COPY_BYTES / (ms * 1e-3) / 1e9


def check(torch, name, mode, got, args, fn, dtype):
    """Raises unless `got` matches `fn` evaluated in float64 on the same inputs."""
    want = fn(*(a.double() for a in args))
    tol = 2e-2 if dtype == "bf16" else 1e-4
    err = (got.double() - want).abs().max().item()
    scale = want.abs().max().item()
    if not err <= tol * (1.0 + scale):
        raise AssertionError(f"{name}/{mode}: max error {err:g} against float64 (scale {scale:g}, tol {tol})")


def run_torch(torch, reps, only, rotate=1):
    """Measures the copy bandwidth and every selected pipeline; returns the --json document."""
    torch.manual_seed(0)
    copy = copy_gbps(torch, reps)
    print(f"copy bandwidth (1 GiB copy_, r+w): {copy:.0f} GB/s", file=sys.stderr)
    rows = []
    for name, dtype, shape, nbytes, make, fn in pipelines(torch):
        if only and name not in only:
            continue
        args = make()
        # With rotate > 1 the timed calls cycle through that many input sets,
        # so no call finds its inputs left in L2 by the previous one.
        sets = [args] + [make() for _ in range(rotate - 1)]
        compiled = torch.compile(fn)
        t0 = time.perf_counter()
        out = compiled(*args)
        torch.cuda.synchronize()
        first_ms = (time.perf_counter() - t0) * 1e3
        check(torch, name, "compile", out, args, fn, dtype)
        check(torch, name, "eager", fn(*args), args, fn, dtype)
        del out
        row = {"pipeline": name, "dtype": dtype, "shape": shape, "bytes": nbytes, "compile_first_call_ms": first_ms}
        for mode, f in (("eager", fn), ("compile", compiled)):
            ms = median_ms(torch, f, args, reps, sets=sets)
            gbps = nbytes / (ms * 1e-3) / 1e9
            row.update({f"{mode}_ms": ms, f"{mode}_gbps": gbps, f"{mode}_pct_copy": 100 * gbps / copy})
        print(f"  {name}: eager {row['eager_pct_copy']:.1f} %, compile {row['compile_pct_copy']:.1f} %",
              file=sys.stderr)
        rows.append(row)
        del args
        torch.cuda.empty_cache()
    return {
        "copy_gbps": copy,
        "torch_version": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "pipelines": rows,
    }


def load_tilefuse(path):
    """Reads and checks a tilefuse throughput JSON (schema in the module docstring)."""
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("copy_gbps"), (int, float)):
        raise ValueError(f"{path}: expected an object with a numeric top-level 'copy_gbps'")
    entries = doc.get("pipelines")
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a list under 'pipelines'")
    for i, e in enumerate(entries):
        for key, ty in TILEFUSE_KEYS.items():
            if not isinstance(e, dict) or not isinstance(e.get(key), ty) or isinstance(e.get(key), bool):
                raise ValueError(f"{path}: pipelines[{i}] lacks '{key}' of type {ty}")
    return doc


def fmt(value, spec, unit=""):
    """A figure formatted with `spec`, or a dash when absent."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:{spec}}{unit}"


def format_table(tilefuse, torch_doc):
    """The side-by-side table of tilefuse's and torch's figures, as text.

    Either document may be None; pipelines are listed in the suite's order of
    whichever documents are given, joined on the pipeline id.
    """
    tf = {e["pipeline"]: e for e in (tilefuse or {}).get("pipelines", [])}
    th = {e["pipeline"]: e for e in (torch_doc or {}).get("pipelines", [])}
    names = list(th) + [n for n in tf if n not in th]
    header = ["pipeline", "dtype", "shape", "tilefuse %copy", "kernels", "eager %copy",
              "compile %copy", "vs compile", "tilefuse 1st call", "compile 1st call", "beats compile"]
    lines = []
    for n in names:
        t, p = tf.get(n, {}), th.get(n, {})
        t_pct, c_pct = t.get("pct_copy"), p.get("compile_pct_copy")
        # torch.compile's time over tilefuse's: above 1 when tilefuse is faster.
        t_ms, c_ms = t.get("time_ms"), p.get("compile_ms")
        ratio = c_ms / t_ms if t_ms and c_ms else None
        # Each run is normalised by its own copy bandwidth, which moves from
        # process to process; a verdict the times and the fractions of copy
        # bandwidth disagree on is reported as such.
        if t_pct is None or c_pct is None:
            beats = "—"
        elif ratio is None:
            beats = "yes" if t_pct > c_pct else "no"
        elif (t_pct > c_pct) == (ratio > 1.0):
            beats = "yes" if ratio > 1.0 else "no"
        else:
            beats = "split (faster by %copy, slower by time)" if t_pct > c_pct else "split (faster by time, slower by %copy)"
        if t and p and (t["shape"] != p["shape"] or t["dtype"] != p["dtype"]):
            beats += f" (tilefuse ran {t['dtype']} {t['shape']})"
        lines.append([
            n, p.get("dtype", t.get("dtype", "")), p.get("shape", t.get("shape", "")),
            fmt(t_pct, ".1f", " %"), fmt(t.get("kernels"), "d"), fmt(p.get("eager_pct_copy"), ".1f", " %"),
            fmt(c_pct, ".1f", " %"), fmt(ratio, ".3f"), fmt(t.get("first_call_ms"), ".1f", " ms"),
            fmt(p.get("compile_first_call_ms"), ".0f", " ms"), beats,
        ])
    widths = [max(len(str(r[i])) for r in [header] + lines) for i in range(len(header))]
    out = [f"copy bandwidth: tilefuse run {fmt((tilefuse or {}).get('copy_gbps'), '.0f', ' GB/s')}, "
           f"torch run {fmt((torch_doc or {}).get('copy_gbps'), '.0f', ' GB/s')}"]
    for r in [header, ["-" * w for w in widths]] + lines:
        out.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(out)


def selftest():
    """Formats fabricated figures, through the same JSON reading and table code as a real run."""
    fake_tf = {"copy_gbps": 4000.0, "pipelines": [
        {"pipeline": "chain", "dtype": "f32", "shape": f"[{FLAT}]", "bytes": 16 * FLAT, "time_ms": 1.0,
         "gbps": 1.0, "pct_copy": 91.0, "kernels": 1, "first_call_ms": 12.0},
        {"pipeline": "softmax", "dtype": "f32", "shape": "[8, 8]", "bytes": 512, "time_ms": 1.0,
         "gbps": 1.0, "pct_copy": 50.0, "kernels": 2, "first_call_ms": 3.0},
        {"pipeline": "layernorm", "dtype": "f32", "shape": f"[{M}, {K}]", "bytes": 16 * M * K, "time_ms": 1.0,
         "gbps": 1.0, "pct_copy": 99.2, "kernels": 1, "first_call_ms": 6.0},
    ]}
    fake_torch = {"copy_gbps": 3900.0, "pipelines": [
        {"pipeline": "chain", "dtype": "f32", "shape": f"[{FLAT}]", "bytes": 16 * FLAT, "eager_pct_copy": 20.0,
         "compile_pct_copy": 90.0, "compile_ms": 1.01, "compile_first_call_ms": 9000.0},
        {"pipeline": "layernorm", "dtype": "f32", "shape": f"[{M}, {K}]", "bytes": 16 * M * K,
         "eager_pct_copy": 12.0, "compile_pct_copy": 98.8, "compile_ms": 0.99, "compile_first_call_ms": 600.0},
        {"pipeline": "softmax", "dtype": "f32", "shape": f"[{M}, {K}]", "bytes": 8 * M * K,
         "eager_pct_copy": 60.0, "compile_pct_copy": 70.0, "compile_first_call_ms": 500.0},
        {"pipeline": "sum", "dtype": "f32", "shape": f"[{FLAT}]", "bytes": 4 * FLAT, "eager_pct_copy": 85.0,
         "compile_pct_copy": 70.0, "compile_first_call_ms": 300.0},
    ]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(fake_tf, f)
    try:
        table = format_table(load_tilefuse(f.name), fake_torch)
    finally:
        os.unlink(f.name)
    rows = {line.split()[0]: line for line in table.splitlines()[3:]}
    assert rows["chain"].split()[-1] == "yes", rows["chain"]
    assert "1.010" in rows["chain"], rows["chain"]
    assert "split (faster by %copy, slower by time)" in rows["layernorm"], rows["layernorm"]
    assert "no (tilefuse ran f32 [8, 8])" in rows["softmax"], rows["softmax"]
    assert rows["sum"].split()[-1] == "—", rows["sum"]
    print("FORMAT CHECK ONLY: the figures below are fabricated, not measurements.")
    print(table)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tilefuse", metavar="PATH", help="tilefuse's throughput JSON to compare with")
    ap.add_argument("--json", metavar="OUT", help="write torch's figures to OUT")
    ap.add_argument("--reps", type=int, default=100, help=f"timed repetitions per figure (at least {MIN_REPS})")
    ap.add_argument("--only", nargs="+", metavar="ID", help="run only these pipelines")
    ap.add_argument("--rotate", type=int, default=1, metavar="N",
                    help="timed calls cycle through N input sets (no L2 carry-over between calls)")
    ap.add_argument("--allow-cache", action="store_true", help="let Inductor use its on-disk caches")
    ap.add_argument("--selftest", action="store_true", help="format fabricated figures (a format check only)")
    args = ap.parse_args(argv)
    if args.selftest:
        return selftest()
    if args.reps < MIN_REPS:
        ap.error(f"--reps must be at least {MIN_REPS}")
    try:
        tilefuse = load_tilefuse(args.tilefuse) if args.tilefuse else None
    except (OSError, ValueError) as e:
        ap.error(f"cannot read --tilefuse: {e}")
    if not args.allow_cache:
        os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print("PyTorch with a CUDA device is not available here; no torch figures measured.")
        if tilefuse:
            print(format_table(tilefuse, None))
        return 0
    if args.only:
        known = {p[0] for p in pipelines(torch)}
        unknown = sorted(set(args.only) - known)
        if unknown:
            ap.error(f"unknown pipeline ids {unknown}; known: {sorted(known)}")
    doc = run_torch(torch, args.reps, set(args.only or []), max(1, args.rotate))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    print(format_table(tilefuse, doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
