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

Sweep mode (``--sweep PATH``): reads the JSON of tilefuse's random sweep
(``cargo run --release --example sweep -- --json PATH``), rebuilds every case
from its ``spec`` in PyTorch on the GPU (random inputs of the same shapes,
dtypes, value ranges and views; the library op where the case uses one,
else the same ops as written), checks eager and torch.compile against the
same function evaluated in float64 (relative error 1e-4 for f32, 1e-2 for f16
and bf16, 1e-10 for f64; indices exactly) before timing them (CUDA events,
median of ``--reps``), measures the copy bandwidth in the same process, and
prints per case tilefuse's % of copy (from the JSON), eager's and compile's,
and the ratio of tilefuse's % of copy to the better of the two (above 1:
tilefuse faster); then the distributions (median and 10th percentile), on how
many cases torch is faster, the geometric mean of the ratio, and per-class
medians. The shapes are the JSON's: a GPU sweep's cases are 256 MiB or more,
over 4x the L2 (a case under that is flagged). ``--start K --limit N`` takes a
slice of the JSON's cases and ``--no-compile`` skips torch.compile, whose
compile of a new case takes a second or more (Inductor's caches are off unless
``--allow-cache``): a 200-case run with compile takes several minutes, so
split it across calls with ``--start``/``--limit`` and one ``--json OUT`` each.

The sweep's ``spec`` of a case::

    {"op": "sum" | "mean" | "max" | "min" | "var"        # over axis of x viewed through perm
           | "mean_var" | "sum_max"                       # two outputs over axis
           | "argmax" | "argmin"                          # over axis
           | "softmax" | "log_softmax" | "rms_norm" | "layer_norm"   # over the last axis
           | "chain"                                      # steps applied to x in order
           | "cat"                                        # x and the other inputs joined along axis
           | "cumsum" | "logcumsumexp"                    # along axis
           | "cross_entropy"                              # rows of x, labels (truncated) the 2nd input
           | "sort" | "topk"                              # along axis: values and int64 positions
           | "scatter_add",                               # base (3rd input) .scatter_add(axis, index (2nd, truncated), x)
     "dtype": "f32" | "f16" | "bf16" | "f64",
     "shape": [int],                # x as stored, row-major
     "perm": [int] | null,          # reductions: x.permute(perm) first
     "axis": int,                   # the reduced (or normalised) axis
     "form": "library" | "written", "weight": bool, "bias": bool, "eps": float | null,  # row ops
     "steps": [{"op": unary} | {"op": "affine", "scale": float, "shift": float}
               | {"op": "add" | "sub" | "mul" | "maximum", "input": int}],   # chains
     "then": unary | null,          # cat: applied to the joined tensor
     "descending": bool, "k": int,  # sort, topk
     "inputs": [{"name": str, "shape": [int], "range": [lo, hi], "broadcast_axes": [int],
                 "dtype": str}],                            # dtype only where not the case's
     "outputs": [{"shape": [int], "dtype": str}]}

Unary steps: relu, tanh, sigmoid, silu, gelu_tanh, exp, exp_neg_sq (exp(-v*v)),
log1p_abs (log(|v| + 1)), sqrt, log. Input values are the mean of two uniforms
on [lo, hi]; var is unbiased; layer_norm's variance is biased. In the sweep
JSON each case also has ``case`` (its id), ``class``, ``description``,
``bytes`` (minimal), ``time_ms``, ``gbps``, ``pct_copy``, ``first_call_ms``,
``kernels``, ``strategy`` and ``rel_error`` (null where not measured), ``ok``
and ``error``; the top level has ``copy_gbps``, ``device`` and ``seed``.
``--json OUT`` in sweep mode writes ``copy_gbps``, ``torch_version``,
``device`` and ``cases`` entries with ``case``, ``class``, ``bytes``, and for
each of ``eager`` and ``compile`` ``<mode>_ms``, ``<mode>_pct_copy`` and
``<mode>_error`` (null, or why the mode was not timed), plus
``compile_first_call_ms``.

Without torch or a CUDA device the script says so and exits 0 (in sweep mode
after printing tilefuse's figures). ``--selftest`` runs the table formatting
of both modes on fabricated figures: a format check only, never results.
"""

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import warnings

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


# Every sweep case entry must have these keys, of these types (None: may be null).
SWEEP_KEYS = {
    "case": (str,),
    "class": (str,),
    "spec": (dict,),
    "bytes": (int,),
    "ok": (bool,),
    "pct_copy": (int, float, type(None)),
    "time_ms": (int, float, type(None)),
}

SWEEP_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64"}
SWEEP_TOLERANCE = {"f32": 1e-4, "f16": 1e-2, "bf16": 1e-2, "f64": 1e-10}


def load_sweep(path):
    """Reads and checks a tilefuse sweep JSON (schema in the module docstring)."""
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("copy_gbps"), (int, float)):
        raise ValueError(f"{path}: expected an object with a numeric top-level 'copy_gbps'")
    cases = doc.get("cases")
    if not isinstance(cases, list):
        raise ValueError(f"{path}: expected a list under 'cases'")
    for i, e in enumerate(cases):
        for key, types in SWEEP_KEYS.items():
            v = e.get(key) if isinstance(e, dict) else None
            if not isinstance(e, dict) or key not in e or not isinstance(v, types) or (
                    isinstance(v, bool) and bool not in types):
                raise ValueError(f"{path}: cases[{i}] lacks '{key}' of type {types}")
        spec = e["spec"]
        if spec.get("dtype") not in SWEEP_DTYPES or not isinstance(spec.get("inputs"), list):
            raise ValueError(f"{path}: cases[{i}] ({e['case']}) has a spec without a known dtype and inputs")
    return doc


def sweep_inputs(torch, spec):
    """Random inputs of the spec's shapes and dtype: the mean of two uniforms on each input's range."""
    out = []
    for inp in spec["inputs"]:
        # An input's own dtype (cross-entropy's f32 labels), else the case's.
        dtype = getattr(torch, SWEEP_DTYPES[inp.get("dtype", spec["dtype"])])
        draw = torch.float64 if dtype == torch.float64 else torch.float32
        lo, hi = inp["range"]
        u = torch.rand(inp["shape"], device="cuda", dtype=draw)
        u += torch.rand(inp["shape"], device="cuda", dtype=draw)
        out.append((u.mul_((hi - lo) / 2).add_(lo)).to(dtype))
        del u
    return out


def sweep_function(torch, spec):
    """The case as a function of its inputs returning a tuple of outputs."""
    F = torch.nn.functional
    op, axis = spec["op"], spec.get("axis")
    reductions = {
        "sum": lambda v, a: v.sum(a),
        "mean": lambda v, a: v.mean(a),
        "max": lambda v, a: v.amax(a),
        "min": lambda v, a: v.amin(a),
        "var": lambda v, a: v.var(a),
    }
    if op in reductions:
        perm = spec.get("perm")
        red = reductions[op]
        if perm:
            return lambda x: (red(x.permute(*perm), axis),)
        return lambda x: (red(x, axis),)
    if op == "mean_var":
        return lambda x: (x.mean(axis), x.var(axis))
    if op == "sum_max":
        return lambda x: (x.sum(axis), x.amax(axis))
    if op == "argmax":
        return lambda x: (x.argmax(axis),)
    if op == "argmin":
        return lambda x: (x.argmin(axis),)
    if op == "chain":
        return chain_function(torch, spec["steps"])
    if op == "cross_entropy":
        F = torch.nn.functional
        return lambda x, labels: (F.cross_entropy(x, labels.long()[:, 0], reduction="none"),)
    if op == "sort":
        descending = spec["descending"]
        return lambda x: tuple(torch.sort(x, dim=axis, descending=descending, stable=True))
    if op == "topk":
        k = spec["k"]

        def topk(x):
            # Equal values may be picked in any order: the positions are checked
            # through the values they hold.
            values, positions = torch.topk(x, k, dim=axis)
            return (values, x.gather(axis, positions))
        return topk
    if op == "scatter_add":
        return lambda x, index, base: (base.scatter_add(axis, index.long(), x),)
    if op == "cumsum":
        return lambda x: (torch.cumsum(x, axis),)
    if op == "logcumsumexp":
        return lambda x: (torch.logcumsumexp(x, axis),)
    if op == "cat":
        then = spec.get("then")
        after = chain_function(torch, [{"op": then}]) if then else (lambda v: (v,))
        return lambda *pieces: after(torch.cat(pieces, axis))
    library, eps, n = spec.get("form") == "library", spec.get("eps"), spec["shape"][-1]
    weight, bias = spec.get("weight"), spec.get("bias")

    def affine(y, rest):
        rest = list(rest)
        if weight:
            y = y * rest.pop(0)
        if bias:
            y = y + rest.pop(0)
        return y

    if op == "softmax":
        if library:
            return lambda x: (torch.softmax(x, -1),)

        def softmax(x):
            e = (x - x.amax(-1, keepdim=True)).exp()
            return (e / e.sum(-1, keepdim=True),)
        return softmax
    if op == "log_softmax":
        if library:
            return lambda x: (torch.log_softmax(x, -1),)

        def log_softmax(x):
            d = x - x.amax(-1, keepdim=True)
            return (d - d.exp().sum(-1, keepdim=True).log(),)
        return log_softmax
    if op == "rms_norm":
        if library:
            return lambda x, *wb: (F.rms_norm(x, (n,), wb[0] if weight else None, eps),)
        return lambda x, *wb: (affine(x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps), wb),)
    if op == "layer_norm":
        if library:
            def layer_norm(x, *wb):
                rest = list(wb)
                w = rest.pop(0) if weight else None
                b = rest.pop(0) if bias else None
                return (F.layer_norm(x, (n,), w, b, eps),)
            return layer_norm

        def written_layer_norm(x, *wb):
            d = x - x.mean(-1, keepdim=True)
            var = (d * d).mean(-1, keepdim=True)
            return (affine(d * torch.rsqrt(var + eps), wb),)
        return written_layer_norm
    raise ValueError(f"unknown sweep op {op!r}")


def chain_function(torch, steps):
    """An elementwise chain: each step applied to the running value, operands by input index."""
    F = torch.nn.functional
    unary = {
        "relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": F.silu,
        "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"), "exp": torch.exp,
        "exp_neg_sq": lambda v: torch.exp(-(v * v)), "log1p_abs": lambda v: torch.log(v.abs() + 1),
        "sqrt": torch.sqrt, "log": torch.log,
    }
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum}
    for step in steps:
        if step["op"] not in unary and step["op"] not in binary and step["op"] != "affine":
            raise ValueError(f"unknown chain step {step['op']!r}")

    def chain(*inputs):
        v = inputs[0]
        for step in steps:
            op = step["op"]
            if op == "affine":
                v = v * step["scale"] + step["shift"]
            elif op in binary:
                v = binary[op](v, inputs[step["input"]])
            else:
                v = unary[op](v)
        return (v,)
    return chain


def sweep_check(torch, outs, want, dtype):
    """None when `outs` match `want` (float64), else what differs."""
    for k, (g, w) in enumerate(zip(outs, want)):
        if tuple(g.shape) != tuple(w.shape):
            return f"output {k} has shape {tuple(g.shape)}, float64 {tuple(w.shape)}"
        if not w.is_floating_point():
            wrong = int((g != w).sum().item())
            if wrong:
                return f"output {k}: {wrong} of {w.numel()} indices differ from float64"
            continue
        g = g.double()
        err = ((g - w).norm() / w.norm().clamp_min(1e-300)).item()
        if not err <= SWEEP_TOLERANCE[dtype]:
            return f"output {k}: relative error {err:.3e} against float64 (tolerance {SWEEP_TOLERANCE[dtype]:g})"
    return None


def run_sweep_torch(torch, cases, reps, compile_too, json_out=None):
    """Measures the copy bandwidth, then each case eager and compiled; returns the --json document,
    also written to `json_out` after every case (so a run cut short keeps what it measured)."""
    torch.manual_seed(0)
    copy = copy_gbps(torch, reps)
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)
    print(f"copy bandwidth (1 GiB copy_, r+w): {copy:.0f} GB/s; L2 {l2 >> 20} MiB", file=sys.stderr)
    dynamo = getattr(torch, "_dynamo", None)
    if dynamo is not None:
        # Every case is a new function of new shapes: no recompile limit may send one back to eager.
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(dynamo.config, name):
                setattr(dynamo.config, name, 1 << 16)
    rows = []
    doc = {"copy_gbps": copy, "torch_version": torch.__version__,
           "device": torch.cuda.get_device_name(), "cases": rows}
    for e in cases:
        if json_out and rows:
            with open(json_out, "w") as f:
                json.dump(doc, f, indent=2)
        spec, started = e["spec"], time.perf_counter()
        row = {"case": e["case"], "class": e["class"], "bytes": e["bytes"]}
        if e["bytes"] < 4 * l2:
            print(f"  {e['case']}: {e['bytes'] >> 20} MiB is under 4x the L2", file=sys.stderr)
        try:
            fn = sweep_function(torch, spec)
            args = sweep_inputs(torch, spec)
            want = fn(*(a.double() for a in args))
        except (RuntimeError, ValueError) as err:  # out of memory, an unknown op
            row.update({f"{m}_error": f"not built: {err}" for m in ("eager", "compile")})
            rows.append(row)
            continue
        modes = [("eager", fn)]
        if compile_too:
            if dynamo is not None:
                dynamo.reset()
            compiled = torch.compile(fn, dynamic=False)
            modes.append(("compile", compiled))
        for mode, f in modes:
            try:
                t0 = time.perf_counter()
                outs = f(*args)
                torch.cuda.synchronize()
                if mode == "compile":
                    row["compile_first_call_ms"] = (time.perf_counter() - t0) * 1e3
                error = sweep_check(torch, outs, want, spec["dtype"])
                del outs
                if error is None:
                    ms = median_ms(torch, f, args, reps)
                    row[f"{mode}_ms"] = ms
                    row[f"{mode}_pct_copy"] = 100 * e["bytes"] / (ms * 1e-3) / 1e9 / copy
            except Exception as err:  # a failed compile, launch or timing is this mode's result, not the run's
                error = f"{type(err).__name__}: {err}"
            row[f"{mode}_error"] = error
        if not compile_too:
            row["compile_error"] = "not run (--no-compile)"
        print(f"  {e['case']}: eager {fmt(row.get('eager_pct_copy'), '.1f', ' %')}, "
              f"compile {fmt(row.get('compile_pct_copy'), '.1f', ' %')} "
              f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
        for mode in ("eager", "compile"):
            if row.get(f"{mode}_error"):
                print(f"    {mode}: {row[f'{mode}_error']}", file=sys.stderr)
        rows.append(row)
        del args, want
        torch.cuda.empty_cache()
    return doc


def quantile(values, q):
    """The element at `q` of the way from the smallest to the largest (rounded down), as the sweep reports."""
    v = sorted(values)
    return v[int((len(v) - 1) * q)]


def format_sweep(sweep, torch_doc):
    """The per-case table and the distributions of tilefuse's and torch's sweep figures, as text.

    `torch_doc` may be None (tilefuse's figures alone); cases are joined on their id.
    """
    th = {r["case"]: r for r in (torch_doc or {}).get("cases", [])}
    cases = [e for e in sweep["cases"] if not th or e["case"] in th]
    header = ["case", "class", "dtype", "tilefuse %copy", "eager %copy", "compile %copy", "tilefuse/best torch",
              "expression"]
    lines, per = [], []
    for e in cases:
        p = th.get(e["case"], {})
        t = e["pct_copy"] if e["ok"] else None
        eager, comp = p.get("eager_pct_copy"), p.get("compile_pct_copy")
        best = max((v for v in (eager, comp) if v is not None), default=None)
        ratio = t / best if t is not None and best else None
        per.append((e["class"], t, eager, comp, best, ratio))
        lines.append([e["case"], e["class"], e["spec"]["dtype"], fmt(t, ".1f", " %") if e["ok"] else "FAILED",
                      fmt(eager, ".1f", " %"), fmt(comp, ".1f", " %"), fmt(ratio, ".2f"), e.get("description", "")])
    widths = [max(len(str(r[i])) for r in [header] + lines) for i in range(len(header))]
    out = [f"copy bandwidth: tilefuse run {fmt(sweep.get('copy_gbps'), '.0f', ' GB/s')} "
           f"({sweep.get('device', '?')}), torch run {fmt((torch_doc or {}).get('copy_gbps'), '.0f', ' GB/s')}"]
    for r in [header, ["-" * w for w in widths]] + lines:
        out.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())

    def dist(name, values):
        v = [x for x in values if x is not None]
        if not v:
            return f"{name}: —"
        return f"{name}: median {statistics.median(v):.1f} %, p10 {quantile(v, 0.1):.1f} % ({len(v)} cases)"

    out.append("")
    failed = sum(1 for e in cases if not e["ok"])
    out.append(f"{len(cases)} cases, {failed} failed in tilefuse")
    for i, name in ((1, "tilefuse % of copy"), (2, "eager % of copy"), (3, "compile % of copy"),
                    (4, "best torch % of copy")):
        out.append(dist(name, [r[i] for r in per]))
    ratios = [r[5] for r in per if r[5] is not None]
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        slower = sum(1 for r in ratios if r < 1.0)
        out.append(f"torch faster on {slower} of {len(ratios)} cases; geometric mean of tilefuse/best torch "
                   f"{geo:.2f}x, worst {min(ratios):.2f}x")
    else:
        out.append("torch faster on — cases (no case has both figures)")
    classes = []
    for c in dict.fromkeys(r[0] for r in per):
        rs = [r for r in per if r[0] == c]
        def med(i, spec=".1f", unit=" %"):
            v = [r[i] for r in rs if r[i] is not None]
            return fmt(statistics.median(v) if v else None, spec, unit)
        classes.append(f"{c}: tilefuse {med(1)}, eager {med(2)}, compile {med(3)}, "
                       f"ratio {med(5, '.2f', '')} ({len(rs)} cases)")
    out.append("per-class medians:")
    out.extend("  " + c for c in classes)
    return "\n".join(out)


def sweep_selftest():
    """Formats fabricated sweep figures through the same JSON reading and table code as a real run."""
    def entry(case, cls, pct, ok=True):
        spec = {"op": "sum", "dtype": "f32", "shape": [8, 8], "perm": None, "axis": 1,
                "inputs": [{"name": "x", "shape": [8, 8], "range": [-1.5, 2.5], "broadcast_axes": []}],
                "outputs": [{"shape": [8], "dtype": "f32"}]}
        return {"case": case, "class": cls, "description": f"fake {case}", "spec": spec, "bytes": 288,
                "time_ms": 1.0 if ok else None, "gbps": 1.0 if ok else None, "pct_copy": pct if ok else None,
                "first_call_ms": 2.0, "kernels": 1, "strategy": "k0[8]", "rel_error": 0.0, "ok": ok,
                "error": None if ok else "fabricated failure"}
    fake_sweep = {"copy_gbps": 4000.0, "device": "fake", "seed": 1, "cases": [
        entry("s1-0000", "reduce_inner", 80.0), entry("s1-0001", "reduce_outer", 20.0),
        entry("s1-0002", "reduce_inner", 90.0), entry("s1-0003", "argmax", 0.0, ok=False)]}
    fake_torch = {"copy_gbps": 3900.0, "cases": [
        {"case": "s1-0000", "eager_pct_copy": 40.0, "compile_pct_copy": 50.0},
        {"case": "s1-0001", "eager_pct_copy": 40.0, "compile_pct_copy": None, "compile_error": "fabricated"},
        {"case": "s1-0002", "eager_pct_copy": 45.0, "compile_pct_copy": 90.0},
        {"case": "s1-0003", "eager_pct_copy": 10.0, "compile_pct_copy": 12.0}]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(fake_sweep, f)
    try:
        text = format_sweep(load_sweep(f.name), fake_torch)
    finally:
        os.unlink(f.name)
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("s1-")}
    assert "1.60" in rows["s1-0000"] and "0.50" in rows["s1-0001"] and "1.00" in rows["s1-0002"], text
    assert "FAILED" in rows["s1-0003"], rows["s1-0003"]
    assert "4 cases, 1 failed in tilefuse" in text, text
    assert "torch faster on 1 of 3 cases" in text, text
    assert f"geometric mean of tilefuse/best torch {(1.6 * 0.5 * 1.0) ** (1 / 3):.2f}x, worst 0.50x" in text, text
    assert "tilefuse % of copy: median 80.0 %, p10 20.0 % (3 cases)" in text, text
    assert "reduce_inner: tilefuse 85.0 %, eager 42.5 %, compile 70.0 %, ratio 1.30 (2 cases)" in text, text
    assert "argmax: tilefuse —, eager 10.0 %" in text, text
    bad = dict(fake_sweep, cases=[dict(fake_sweep["cases"][0], ok="yes")])
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(bad, f)
    try:
        load_sweep(f.name)
        raise AssertionError("a case whose 'ok' is not a bool was accepted")
    except ValueError:
        pass
    finally:
        os.unlink(f.name)
    alone = format_sweep(fake_sweep, None)
    assert "torch faster on — cases" in alone, alone
    print(text)


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
    print()
    sweep_selftest()
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
    ap.add_argument("--sweep", metavar="PATH", help="tilefuse's sweep JSON: rebuild and time its cases in PyTorch")
    ap.add_argument("--start", type=int, default=0, metavar="K", help="sweep: begin at the K-th case of the JSON")
    ap.add_argument("--limit", type=int, metavar="N", help="sweep: at most N cases")
    ap.add_argument("--no-compile", action="store_true", help="sweep: time eager only")
    args = ap.parse_args(argv)
    if args.selftest:
        return selftest()
    if args.reps < MIN_REPS:
        ap.error(f"--reps must be at least {MIN_REPS}")
    if args.sweep:
        return main_sweep(ap, args)
    if args.start or args.limit is not None or args.no_compile:
        ap.error("--start, --limit and --no-compile go with --sweep")
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


def main_sweep(ap, args):
    """--sweep: tilefuse's sweep cases beside PyTorch eager and torch.compile."""
    if args.tilefuse or args.only or args.rotate != 1:
        ap.error("--tilefuse, --only and --rotate do not go with --sweep")
    if args.start < 0 or (args.limit is not None and args.limit < 1):
        ap.error("--start must be at least 0 and --limit at least 1")
    try:
        sweep = load_sweep(args.sweep)
    except (OSError, ValueError) as e:
        ap.error(f"cannot read --sweep: {e}")
    end = None if args.limit is None else args.start + args.limit
    sweep = dict(sweep, cases=sweep["cases"][args.start:end])
    if not sweep["cases"]:
        ap.error(f"--start {args.start} leaves no case of {args.sweep}")
    if not args.allow_cache:
        os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print("PyTorch with a CUDA device is not available here; no torch figures measured.")
        print(format_sweep(sweep, None))
        return 0
    # Caches are off on purpose; Inductor warns of it once per compile.
    warnings.filterwarnings("ignore", message=".*force disabled by torch.compiler.config.force_disable_caches")
    doc = run_sweep_torch(torch, sweep["cases"], args.reps, not args.no_compile, args.json)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    print(format_sweep(sweep, doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
