#!/usr/bin/env python3
"""Measure PyTorch kernel latency tables on this GPU, in AIConfigurator's database layout.

Writes OUT/<system>/<op_family>/torch/<torch_version>/<table>.parquet (.csv without pyarrow),
a collection_meta.yaml beside each table and OUT/<system>/README.txt, following the layout and
schema of NVIDIA AIConfigurator's public silicon database (`aiconfigurator-core`, Apache-2.0).
The engine key is `torch`: the tables time PyTorch's own kernels, not a serving engine's.
docs/profiling.md gives the grids and how the planner reads the result.

  gemm_perf                  y[m,n] = x[m,k] @ w[n,k]^T: F.linear (bfloat16); torch._scaled_mm
                             (fp8 per-tensor, sm >= 89); fp8_block and nvfp4 where this torch runs
                             them. fp8 rows include dynamic activation quantization, as AIC's do.
  context_attention_perf     SDPA flash backend, causal prefill of isl tokens per sequence, step 0.
  generation_attention_perf  one query token over a KV of step + 1 tokens (AIC: isl 1, step 2^k-1).
  moe_perf                   routed experts of one layer: top-k, gather, gate_up and down grouped
                             GEMMs (torch._grouped_mm, else a matmul loop), SiLU*mul, weighted
                             scatter-add; balanced routing; ep emulated as AIC does (E/ep local
                             experts receiving num_tokens*topk/ep rows).
  nccl_perf (comm)           all_reduce / all_gather / reduce_scatter through torch.distributed
                             (NCCL, fp16, message_size in elements), only with several GPUs.

latency is milliseconds per call on one GPU. Each op is warmed up, captured in a CUDA graph and
replayed; CUDA events time each replay; the figure is the median of >= 10 replays. L2 is not
flushed, as in AIC's collectors; as in AIC's GEMM collector, a GEMM graph cycles through up to
six weight copies (enough to exceed twice the L2) so that small weights are not served hot.
Collectives are timed eagerly: the slowest rank's mean over synchronized iterations.

    python3 scripts/profile_kernels.py --out DIR [--budget-minutes 8] [--ops gemm,moe]
    python3 scripts/profile_kernels.py --smoke --out /tmp/p   # seconds, CPU or GPU, schema check
"""

import argparse
import logging
import math
import os
import platform
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F

log = logging.getLogger("profile_kernels")

ENGINE = "torch"
COMMON = [("framework", "str"), ("version", "str"), ("device", "str"), ("op_name", "str"),
          ("kernel_source", "str")]
ATTN = [("batch_size", "int"), ("isl", "int"), ("num_heads", "int"),
        ("num_key_value_heads", "int"), ("head_dim", "int"), ("beam_width", "int"),
        ("attn_dtype", "str"), ("kv_cache_dtype", "str"), ("step", "int"), ("window_size", "int")]
LAT = [("latency", "float")]
# table -> (op family directory, op_name column or None when rows carry it, columns in AIC's order)
TABLES = {
    "gemm_perf": ("gemm", "gemm", COMMON + [("gemm_dtype", "str"), ("m", "int"), ("n", "int"),
                                            ("k", "int")] + LAT),
    "context_attention_perf": ("attention", "context_attention", COMMON + ATTN + LAT),
    "generation_attention_perf": ("attention", "generation_attention", COMMON + ATTN + LAT),
    "moe_perf": ("moe", "moe", COMMON + [
        ("moe_dtype", "str"), ("num_tokens", "int"), ("hidden_size", "int"), ("inter_size", "int"),
        ("topk", "int"), ("num_experts", "int"), ("moe_tp_size", "int"), ("moe_ep_size", "int"),
        ("distribution", "str")] + LAT),
    "nccl_perf": ("comm", None, COMMON + [("nccl_dtype", "str"), ("num_gpus", "int"),
                                          ("message_size", "int")] + LAT),
}
OPS = {"gemm": "gemm_perf", "context_attention": "context_attention_perf",
       "generation_attention": "generation_attention_perf", "moe": "moe_perf", "comm": "nccl_perf"}
# Share of the budget each table may use; time a table leaves unused passes to the next ones.
SHARES = {"gemm_perf": 0.55, "context_attention_perf": 0.15, "generation_attention_perf": 0.1,
          "moe_perf": 0.12, "nccl_perf": 0.08}

# --- shape grids ---------------------------------------------------------------------------
GEMM_M = list(range(1, 17)) + [32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048,
                               3072, 4096, 6144, 8192, 16384]
# widths in priority order: when the budget runs short the last (n, k) pairs are dropped
GEMM_WIDTHS = [4096, 8192, 2048, 5120, 7168, 14336, 1024, 6144, 12288, 16384, 28672]
# (num_heads, num_key_value_heads, head_dim) per GPU: Llama/Qwen dense and MoE at TP 1..8, gpt-oss
HEADS = [(64, 8, 128), (32, 8, 128), (32, 4, 128), (16, 4, 128), (16, 2, 128), (8, 2, 128),
         (8, 1, 128), (4, 1, 128), (64, 8, 64), (32, 4, 64), (16, 2, 64), (8, 1, 64), (32, 32, 128)]
CTX_BATCH = [1, 2, 4, 8, 16, 32, 64, 128, 256]
CTX_ISL = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
CTX_MAX_TOKENS = 65536                     # batch * isl cap, as AIC's collector caps MHA cases
GEN_BATCH = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
GEN_KV = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
GEN_MAX_KV_BYTES = 4 << 30                 # skip decode cases whose K+V exceed 4 GiB
# (name, hidden, inter, topk, experts)
MOE_MODELS = [("Qwen3-30B-A3B", 2048, 768, 8, 128), ("Qwen3-235B-A22B", 4096, 1536, 8, 128),
              ("gpt-oss-120b", 2880, 2880, 4, 128), ("DeepSeek-V3", 7168, 2048, 8, 256),
              ("Mixtral-8x7B", 4096, 14336, 2, 8)]
MOE_TOKENS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192]
MOE_EP = [1, 8]
COMM_SIZES = [1 << p for p in range(8, 29)]  # 256 .. 256M elements
SMOKE = dict(gemm_m=[1, 8], gemm_nk=[(256, 128), (128, 256)], heads=[(4, 1, 64), (4, 4, 64)],
             ctx_batch=[1, 2], ctx_isl=[16, 32], gen_batch=[1, 2], gen_kv=[64, 128],
             moe=[("tiny", 128, 64, 2, 16)], moe_tokens=[1, 4], comm_sizes=[256, 4096])

SYSTEMS = [  # (substring of the upper-cased GPU name, AIC system name); the first match wins
    ("GB300", "gb300"), ("GB200", "gb200"), ("B300", "b300_sxm"), ("B200", "b200_sxm"),
    ("H200", "h200_sxm"), ("H100 PCIE", "h100_pcie"), ("H100", "h100_sxm"), ("H20", "h20"),
    ("A100-PCIE", "a100_pcie"), ("A100 PCIE", "a100_pcie"), ("A100", "a100_sxm"), ("A30", "a30"),
    ("L40S", "l40s"), ("L4", "l4"), ("RTX PRO 6000", "rtx_pro_6000_server")]


def system_name(gpu_name):
    """AIC's system key for a GPU name; a slug of the name for GPUs AIC does not list."""
    for needle, system in SYSTEMS:
        if needle in gpu_name.upper():
            return system
    slug = re.sub(r"[^a-z0-9]+", "_", gpu_name.lower().replace("nvidia", "")).strip("_")
    return slug or "unknown"


def first_line(exc, limit=160):
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:limit]


class Run:
    """What every measurement needs: device facts, timing settings, and notes for the README."""

    def __init__(self, args):
        self.smoke, self.cuda = args.smoke, torch.cuda.is_available()
        self.dev = torch.device("cuda" if self.cuda else "cpu")
        if self.cuda:
            props = torch.cuda.get_device_properties(0)
            self.device_name = torch.cuda.get_device_name(0)
            self.sm, self.memory = props.major * 10 + props.minor, props.total_memory
            self.l2_bytes = getattr(props, "L2_cache_size", 50 << 20)
        else:
            self.device_name, self.sm = f"CPU ({platform.machine()})", 0
            self.l2_bytes, self.memory = 32 << 20, 0
        self.version = torch.__version__.split("+")[0]
        self.system = args.system or (system_name(self.device_name) if self.cuda else "cpu")
        self.out = os.path.join(args.out, self.system)
        self.replays, self.warmup = args.replays, 2
        self.graphs = self.cuda and not args.no_graphs
        self.notes = []  # what was measured or skipped, and why

    def note(self, msg):
        log.info(msg)
        self.notes.append(msg)

    def randn(self, *shape):
        return torch.randn(*shape, device=self.dev, dtype=torch.bfloat16)


# --- timing --------------------------------------------------------------------------------
def measure(run, calls):
    """Median milliseconds of one call. `calls` are the same op over distinct operand copies;
    they are captured together in one CUDA graph whose replay time is divided among them."""
    def eager():
        for c in calls:
            c()
    if not run.cuda:
        eager()
        samples = []
        for _ in range(run.replays):
            t0 = time.perf_counter()
            eager()
            samples.append((time.perf_counter() - t0) * 1e3 / len(calls))
        return statistics.median(samples)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # lazy initialisation (handles, workspaces) before capture
        eager()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    replay = eager
    if run.graphs:
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                eager()
            replay = graph.replay
        except Exception as exc:  # an op that refuses capture is timed eagerly
            msg = f"graph capture failed, timed eagerly: {first_line(exc)}"
            if msg not in run.notes:
                run.note(msg)
            torch.cuda.synchronize()
    for _ in range(run.warmup):
        replay()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(run.replays)]
    for start, end in events:
        start.record()
        replay()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) / len(calls) for s, e in events)


def sweep(run, table, cases, build, deadline):
    """Measure each case until the deadline; a case that fails (OOM, unsupported shape) is
    skipped, each distinct error logged once. Returns (rows, status)."""
    rows, errors = [], {}
    for i, case in enumerate(cases):
        if time.monotonic() > deadline:
            run.note(f"{table}: budget reached after {i} of {len(cases)} cases; rest not measured")
            return rows, "partial"
        calls, failed = None, False
        try:
            source, calls = build(case)
            rows.append(dict(case, kernel_source=source, latency=measure(run, calls)))
        except Exception as exc:
            msg, failed = first_line(exc), True
            if msg not in errors:
                log.warning("%s %s failed: %s", table, case, msg)
            errors[msg] = errors.get(msg, 0) + 1
        calls = None
        if run.cuda:
            try:
                if failed or torch.cuda.memory_reserved() > 0.7 * run.memory:
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()  # return what failed cases and dead graphs hold
            except Exception as exc:  # a broken CUDA context: keep what was measured
                run.note(f"{table}: stopped after {i + 1} of {len(cases)} cases: {first_line(exc)}")
                return rows, "partial"
    for msg, count in errors.items():
        run.note(f"{table}: {count} of {len(cases)} cases failed: {msg}")
    return rows, "complete"


def reuse(slot, key, make):
    """Operands kept for the last key only (slot is a dict), so that a sweep over m or
    num_tokens reuses the weights; the old ones are freed before new ones are made."""
    if key not in slot:
        slot.clear()
        slot[key] = make()
    return slot[key]


# --- GEMM ----------------------------------------------------------------------------------
def gemm_candidates(run):
    """{gemm_dtype: [(kernel_source, make_x(m, k), make_w(n, k), call(x, w)), ...]}: the ways
    this torch may run each flavour. Operands are tuples: values, then any scales."""
    e4m3, one = getattr(torch, "float8_e4m3fn", None), torch.ones((), device=run.dev)

    def bf16(rows, cols):
        return (run.randn(rows, cols),)
    cands = {"bfloat16": [("torch.nn.functional.linear", bf16, bf16,
                           lambda x, w: F.linear(x[0], w[0]))]}
    if e4m3 is None or (run.cuda and run.sm < 89):
        run.note("gemm fp8, fp8_block: skipped, they need sm >= 89 and torch.float8_e4m3fn")
        return cands

    def fp8_w(n, k, block=None):  # fp8 weight, column-major as _scaled_mm takes it
        w = run.randn(n, k).to(e4m3).t()
        if block is None:
            return (w,)
        # unit 128x128-block scales, [k-blocks, n-blocks] with the k-blocks contiguous: torch's
        # recipe API wants the k-blocks padded to a multiple of 4 ("padded"), the older
        # _scaled_mm the exact count ("exact"); they coincide when k is a multiple of 512
        kb = k // 128 if block == "exact" else -(-(k // 128) // 4) * 4
        return w, torch.ones(n // 128, kb, device=run.dev).t()

    def quant_tensor(x):  # dynamic per-tensor quantization of the activations
        scale = x.abs().amax().float().div(448.0).clamp_min(1e-12)
        return (x / scale).to(e4m3), scale

    def quant_groups(x):  # dynamic 1x128-group quantization; scales outer-dim-major
        m, k = x.shape
        groups = x.view(m, k // 128, 128)
        scale = groups.abs().amax(-1).float().div(448.0).clamp_min(1e-12)
        return (groups / scale.unsqueeze(-1)).to(e4m3).view(m, k), scale.t().contiguous().t()

    def fp8_call(x, w):
        xq, sx = quant_tensor(x[0])
        return torch._scaled_mm(xq, w[0], sx, one, out_dtype=torch.bfloat16)

    def block_call(x, w):
        xq, sx = quant_groups(x[0])
        return torch._scaled_mm(xq, w[0], sx, w[1], out_dtype=torch.bfloat16)

    def block_call_recipe(x, w):  # newer torch's explicit-recipe API
        xq, sx = quant_groups(x[0])
        st = F.ScalingType
        return F.scaled_mm(xq, w[0], sx, st.BlockWise1x128, w[1], st.BlockWise128x128,
                           output_dtype=torch.bfloat16)

    cands["fp8"] = [("torch._scaled_mm(e4m3,tensorwise)+dynamic_quant", bf16, fp8_w, fp8_call)]
    calls = [("torch._scaled_mm", block_call)]
    if hasattr(F, "scaled_mm"):
        calls.insert(0, ("torch.nn.functional.scaled_mm", block_call_recipe))
    cands["fp8_block"] = [(f"{name}(e4m3,1x128,128x128)+dynamic_quant", bf16,
                           lambda n, k, b=layout: fp8_w(n, k, b), call)
                          for layout in ("padded", "exact") for name, call in calls]
    if run.sm >= 100 and hasattr(torch, "float4_e2m1fn_x2"):
        cands["nvfp4"] = nvfp4_candidates(run, one)
    else:
        run.note("gemm nvfp4: skipped, it needs Blackwell (sm >= 100) and torch with nvfp4")
    return cands


def nvfp4_candidates(run, one):
    """NVFP4: two e2m1 values a byte, an e4m3 scale per 16 values in swizzled 128x4 tiles.
    Activations are taken as already quantized (eager torch has no fp4 cast)."""
    def operand(rows, k):
        values = torch.randint(0, 255, (rows, k // 2), device=run.dev, dtype=torch.uint8)
        tiles = (-(-rows // 128) * 128) * (-(-(k // 16) // 4) * 4)
        return values.view(torch.float4_e2m1fn_x2), torch.ones(tiles, device=run.dev).to(
            torch.float8_e4m3fn)

    def call(x, w, form):  # block scales alone, or with a per-tensor global scale
        if form == "legacy":  # torch._scaled_mm infers nvfp4 from the dtypes
            return torch._scaled_mm(x[0], w[0].t(), x[1], w[1], out_dtype=torch.bfloat16)
        st, sw = F.ScalingType, F.SwizzleType
        if form == "block":
            return F.scaled_mm(x[0], w[0].t(), x[1], st.BlockWise1x16, w[1], st.BlockWise1x16,
                               swizzle_a=sw.SWIZZLE_32_4_4, swizzle_b=sw.SWIZZLE_32_4_4,
                               output_dtype=torch.bfloat16)
        recipe, swizzle = [st.BlockWise1x16, st.TensorWise], [sw.SWIZZLE_32_4_4, sw.NO_SWIZZLE]
        return F.scaled_mm(x[0], w[0].t(), [x[1], one], recipe, [w[1], one], recipe,
                           swizzle_a=swizzle, swizzle_b=swizzle, output_dtype=torch.bfloat16)
    forms = (["block", "global"] if hasattr(F, "scaled_mm") else []) + ["legacy"]
    return [(f"{'torch._scaled_mm' if f == 'legacy' else 'torch.nn.functional.scaled_mm'}"
             "(nvfp4,1x16,prequantized_x)", operand, operand, lambda x, w, f=f: call(x, w, f))
            for f in forms]


def gemm_flavours(run):
    """The first candidate of each flavour that runs here and, for fp8 with unit weight
    scales, lands near the plain product of its operands."""
    chosen = {}
    for name, cands in gemm_candidates(run).items():
        errors = []
        for source, make_x, make_w, call in cands:
            try:
                x, w = make_x(128, 256), make_w(256, 256)
                y = call(x, w).float()
                if name.startswith("fp8"):
                    ref = x[0].float() @ w[0].float()
                    if (y - ref).norm() > 0.1 * ref.norm():
                        raise RuntimeError("result differs from the plain product")
                chosen[name] = (source, make_x, make_w, call)
                break
            except Exception as exc:
                errors.append(f"{source}: {first_line(exc, 100)}")
        else:
            tried = "; ".join(errors) or "no candidate"
            run.note(f"gemm {name}: skipped, no torch call runs it here ({tried})")
    return chosen


def gemm_table(run):
    flavours = gemm_flavours(run)
    nk = SMOKE["gemm_nk"] if run.smoke else [(n, k) for n in GEMM_WIDTHS for k in GEMM_WIDTHS]
    cases = [dict(gemm_dtype=d, m=m, n=n, k=k) for n, k in nk for d in flavours
             for m in (SMOKE["gemm_m"] if run.smoke else GEMM_M)
             if d == "bfloat16" or (n % 128 == 0 and k % 128 == 0)
             # cuBLAS's block-scaled path wants the activation scales' outer stride (m floats)
             # 16-byte aligned and torch wants it exactly m: on an H200 (torch 2.11, CUDA 13)
             # every m not a multiple of 4 failed; the reader carries m = 4's utilisation down
             if d != "fp8_block" or m % 4 == 0]
    slot = {}

    def build(c):
        source, make_x, make_w, call = flavours[c["gemm_dtype"]]
        n, k = c["n"], c["k"]
        weight_bytes = n * k * (2 if c["gemm_dtype"] == "bfloat16" else 1)
        copies = 1 if c["gemm_dtype"] in ("fp8_block", "nvfp4") else \
            max(1, min(6, math.ceil(2 * run.l2_bytes / weight_bytes)))
        weights = reuse(slot, (c["gemm_dtype"], n, k, copies),
                        lambda: [make_w(n, k) for _ in range(copies)])
        x = make_x(c["m"], k)
        return source, [lambda w=w: call(x, w) for w in weights]
    return cases, build


# --- attention -----------------------------------------------------------------------------
def attention_table(run, phase):
    """Cases and builder for context (causal prefill) or generation (one query token) attention
    through SDPA's flash backend, with GQA by enable_gqa where flash takes it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [SDPBackend.FLASH_ATTENTION] + ([] if run.cuda else [SDPBackend.MATH])
    try:
        with sdpa_kernel(backends):
            F.scaled_dot_product_attention(run.randn(1, 8, 16, 64), run.randn(1, 2, 16, 64),
                                           run.randn(1, 2, 16, 64), is_causal=True, enable_gqa=True)
        gqa = True
    except Exception as exc:
        run.note(f"attention: flash SDPA takes no enable_gqa here ({first_line(exc)}); KV heads "
                 "are repeated before the timed call")
        gqa = False
    base = dict(beam_width=1, attn_dtype="bfloat16", kv_cache_dtype="bfloat16", window_size=0)
    cases = []
    for h, hkv, d in SMOKE["heads"] if run.smoke else HEADS:
        heads = dict(base, num_heads=h, num_key_value_heads=hkv, head_dim=d)
        if phase == "context":
            cases += [dict(heads, batch_size=b, isl=s, step=0)
                      for s in (SMOKE["ctx_isl"] if run.smoke else CTX_ISL)
                      for b in (SMOKE["ctx_batch"] if run.smoke else CTX_BATCH)
                      if b * s <= CTX_MAX_TOKENS]
        else:
            cases += [dict(heads, batch_size=b, isl=1, step=s - 1)
                      for s in (SMOKE["gen_kv"] if run.smoke else GEN_KV)
                      for b in (SMOKE["gen_batch"] if run.smoke else GEN_BATCH)
                      if 4 * b * s * hkv * d <= GEN_MAX_KV_BYTES]
    source = "torch.nn.functional.scaled_dot_product_attention(flash,{})".format(
        "enable_gqa" if gqa else "repeat_kv")

    def build(c):
        b, h, hkv, d = c["batch_size"], c["num_heads"], c["num_key_value_heads"], c["head_dim"]
        sq, skv = (c["isl"], c["isl"]) if phase == "context" else (1, c["step"] + 1)
        q, k, v = run.randn(b, h, sq, d), run.randn(b, hkv, skv, d), run.randn(b, hkv, skv, d)
        if not gqa and h != hkv:
            k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
        extra, causal = ({"enable_gqa": True} if gqa and h != hkv else {}), phase == "context"

        def call():
            with sdpa_kernel(backends):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **extra)
        return source, [call]
    return cases, build


# --- MoE -----------------------------------------------------------------------------------
def grouped_mm_ok(run):
    """Whether torch._grouped_mm runs here and matches a loop of matmuls (empty group too)."""
    if not hasattr(torch, "_grouped_mm"):
        run.note("moe: torch._grouped_mm missing; experts run as a loop of matmuls")
        return False
    try:
        a, w, bounds = run.randn(24, 64), run.randn(4, 32, 64), [0, 8, 8, 20, 24]
        offs = torch.tensor(bounds[1:], device=run.dev, dtype=torch.int32)
        got = torch._grouped_mm(a, w.transpose(-2, -1), offs=offs).float()
        ref = torch.cat([a[bounds[e]:bounds[e + 1]] @ w[e].t() for e in range(4)]).float()
        if (got - ref).norm() > 0.02 * ref.norm():
            raise RuntimeError("result differs from a loop of matmuls")
        return True
    except Exception as exc:
        run.note(f"moe: torch._grouped_mm unusable here ({first_line(exc)}); loop of matmuls")
        return False


def moe_table(run):
    grouped = grouped_mm_ok(run)
    cases = [dict(moe_dtype="bfloat16", num_tokens=t, hidden_size=hid, inter_size=inter, topk=topk,
                  num_experts=e, moe_tp_size=1, moe_ep_size=ep, distribution="balanced")
             for _, hid, inter, topk, e in (SMOKE["moe"] if run.smoke else MOE_MODELS)
             for ep in MOE_EP if e % ep == 0
             for t in (SMOKE["moe_tokens"] if run.smoke else MOE_TOKENS)]
    source = ("torch._grouped_mm" if grouped else "torch.matmul_loop") + \
        "(topk,gate_up,silu_mul,down,index_add)"
    slot = {}

    def build(c):
        hid, inter, n = c["hidden_size"], c["inter_size"], c["num_tokens"]
        e_local = c["num_experts"] // c["moe_ep_size"]
        w13, w2 = reuse(slot, (hid, inter, e_local), lambda: (run.randn(e_local, 2 * inter, hid),
                                                               run.randn(e_local, hid, inter)))
        rows = max(1, round(n * c["topk"] / c["moe_ep_size"]))  # rows routed to local experts
        counts = [rows // e_local + (1 if e < rows % e_local else 0) for e in range(e_local)]
        bounds = [sum(counts[:e]) for e in range(e_local + 1)]
        offs = torch.tensor(bounds[1:], device=run.dev, dtype=torch.int32)
        token = torch.arange(rows, device=run.dev) % n  # the token each routed row came from
        weight = torch.rand(rows, 1, device=run.dev, dtype=torch.bfloat16)
        x = run.randn(n, hid)
        logits = run.randn(n, c["num_experts"])  # the router's output; its GEMM is not timed
        used = [e for e in range(e_local) if counts[e]]

        def experts(a, w):
            if grouped:
                return torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)
            return torch.cat([a[bounds[e]:bounds[e + 1]] @ w[e].t() for e in used])

        def call():
            # the routing work the engines do; the balanced layout used below is precomputed
            # so that shapes stay static for graph capture
            _, ids = torch.topk(logits.float().softmax(-1), c["topk"])
            ids.view(-1).argsort()
            h = experts(x.index_select(0, token), w13)
            y = experts(F.silu(h[:, :inter]) * h[:, inter:], w2) * weight
            return torch.zeros_like(x).index_add_(0, token, y)
        return source, [call]
    return cases, build


# --- communication (several GPUs) ----------------------------------------------------------
def comm_worker(rank, world, backend, port, sizes, stop_at, path):
    """One rank of a collective sweep; rank 0 writes `op,size,ms` lines to path. With gloo it
    runs on CPU, so a machine without GPUs can check this path."""
    import torch.distributed as dist
    cuda = backend == "nccl"
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)

    def empty(n):
        return torch.empty(n, device=dev, dtype=torch.float16 if cuda else torch.float32)
    ops = {"all_reduce": lambda s: (dist.all_reduce, empty(s)),
           "all_gather": lambda s: (dist.all_gather_into_tensor, empty(s), empty(s // world)),
           "reduce_scatter": lambda s: (dist.reduce_scatter_tensor, empty(s // world), empty(s))}
    lines = []
    for name, make in ops.items():
        for size in sizes:
            stop = torch.tensor([time.time() > stop_at], dtype=torch.int32, device=dev)
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)  # every rank stops at the same case
            if stop.item():
                break
            fn, *args = make(size)
            iters = 20 if size < (1 << 22) else 5
            for step in range(3 + iters):  # as nccl-tests: a host clock around synced iterations
                if step == 3:
                    if cuda:
                        torch.cuda.synchronize()
                    dist.barrier()
                    t0 = time.perf_counter()
                fn(*args)
            if cuda:
                torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) * 1e3 / iters
            slowest = torch.tensor([ms], dtype=torch.float32, device=dev)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # the slowest rank sets the latency
            lines.append(f"{name},{size},{slowest.item()!r}")
    if rank == 0:
        with open(path, "w") as f:
            f.write("\n".join(lines))
    dist.destroy_process_group()


def comm_rows(run, deadline, backend="nccl", worlds=(2, 4, 8)):
    """nccl_perf rows for each world size that fits the visible GPUs (any size with gloo)."""
    gpus = torch.cuda.device_count() if run.cuda else 0
    worlds = [w for w in worlds if backend == "gloo" or w <= gpus]
    if not worlds:
        run.note(f"comm: skipped, {gpus} GPU visible (nccl_perf needs at least two)")
        return [], "complete"
    import torch.multiprocessing as mp
    version = torch.cuda.nccl.version() if backend == "nccl" else ()
    lib = f"NCCL {'.'.join(map(str, version)) if isinstance(version, tuple) else version}" \
        if backend == "nccl" else backend
    rows, path = [], os.path.join(run.out, ".comm_rows.csv")
    for world in worlds:
        if time.monotonic() > deadline:
            run.note(f"nccl_perf: budget reached before {world} GPUs")
            return rows, "partial"
        stop_at = time.time() + deadline - time.monotonic()
        mp.spawn(comm_worker, nprocs=world, args=(
            world, backend, 29500 + world, SMOKE["comm_sizes"] if run.smoke else COMM_SIZES,
            stop_at, path))
        with open(path) as f:
            for line in f.read().splitlines():
                op, size, ms = line.split(",")
                rows.append(dict(op_name=op, kernel_source=f"torch.distributed.{op}({lib})",
                                 nccl_dtype="half", num_gpus=world, message_size=int(size),
                                 latency=float(ms)))
        os.remove(path)
    return rows, "complete"


# --- output --------------------------------------------------------------------------------
def table_dir(run, table):
    return os.path.join(run.out, TABLES[table][0], ENGINE, run.version)


def write_table(run, table, rows):
    """Write rows with exactly AIC's columns and types (string, int64, float64): parquet where
    pyarrow is importable, else CSV with the same columns."""
    _, op_name, cols = TABLES[table]
    fixed = dict(framework=ENGINE, version=run.version, device=run.device_name, op_name=op_name)
    kinds = {"str": (str, "string"), "int": (int, "int64"), "float": (float, "float64")}
    data = {c: [kinds[k][0](r[c] if c in r else fixed[c]) for r in rows] for c, k in cols}
    os.makedirs(table_dir(run, table), exist_ok=True)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
        path = os.path.join(table_dir(run, table), table + ".parquet")
        schema = pa.schema([(c, getattr(pa, kinds[k][1])()) for c, k in cols])
        pq.write_table(pa.table(data, schema=schema), path)
    except ImportError:
        import csv
        path = os.path.join(table_dir(run, table), table + ".csv")
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow([c for c, _ in cols])
            writer.writerows(zip(*(data[c] for c, _ in cols)))
    log.info("wrote %d rows to %s", len(rows), path)


def write_meta(run, statuses):
    """One collection_meta.yaml per table directory, as AIC ships beside its tables."""
    by_dir = {}
    for table, (status, count) in statuses.items():
        by_dir.setdefault(table_dir(run, table), []).append((table, status, count))
    for d, tables in by_dir.items():
        lines = ["# Written by throughput-optimizer's scripts/profile_kernels.py; the layout",
                 "# follows NVIDIA AIConfigurator's silicon database (Apache-2.0).", "",
                 "schema_version: 1", "provenance: collected", "runtime:",
                 f"  framework: {ENGINE}", f"  version: {run.version}", "  abi:",
                 f"    torch: {torch.__version__}", f"    cuda: '{torch.version.cuda or 'none'}'",
                 f"    system: {run.system}", f"    gpu_name: {run.device_name}",
                 f"    compute_capability: '{run.sm // 10}.{run.sm % 10}'", "tables:"]
        for table, status, count in tables:
            lines += [f"  {table}:", f"    rows: {count}", f"    status: {status}"]
        with open(os.path.join(d, "collection_meta.yaml"), "w") as f:
            f.write("\n".join(lines) + "\n")


def write_readme(run, statuses, seconds):
    smoke = " (smoke run: tiny shapes, timings meaningless)" if run.smoke else ""
    lines = [f"Kernel tables measured by scripts/profile_kernels.py on {run.device_name}",
             f"(system {run.system}, torch {torch.__version__}, CUDA {torch.version.cuda}),",
             f"in {seconds:.0f} s{smoke}.", "",
             "Layout and schema follow NVIDIA AIConfigurator's silicon database (Apache-2.0):",
             f"<op_family>/{ENGINE}/{run.version}/<table>.parquet, filed under engine '{ENGINE}'",
             "because the tables time PyTorch's own kernels, not a serving engine's.",
             "Latency: milliseconds per call, median of CUDA-graph replays timed by CUDA events",
             "(wall clock on CPU). L2 is not flushed; GEMM graphs cycle through up to six weight",
             "copies, as AIC's collectors do; fp8 GEMMs include dynamic activation quantization.",
             "", "Tables:"]
    lines += [f"  {t}: {count} rows, {status}" for t, (status, count) in statuses.items()]
    lines += ["", "Notes:"] + [f"  - {n}" for n in run.notes]
    with open(os.path.join(run.out, "README.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


# --- driver --------------------------------------------------------------------------------
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="database root; tables go to OUT/<system>/...")
    p.add_argument("--system", help="AIC system name (default: derived from the GPU name)")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma list of {', '.join(OPS)}")
    p.add_argument("--budget-minutes", type=float, default=8.0,
                   help="stop adding shapes near this wall time and write what was measured")
    p.add_argument("--replays", type=int, default=10, help="timed graph replays per shape (>= 10)")
    p.add_argument("--no-graphs", action="store_true", help="time eagerly instead of via graphs")
    p.add_argument("--smoke", action="store_true", help="a few tiny shapes, seconds, CPU or GPU")
    p.add_argument("--dry-run", action="store_true", help="count the cases, measure nothing")
    args = p.parse_args(argv)
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    if any(o not in OPS for o in ops) or args.replays < 10:
        p.error(f"--ops takes {', '.join(OPS)}; --replays at least 10")
    started = time.monotonic()
    budget_end = started + args.budget_minutes * 60.0 - (2 if args.smoke else 15)  # 15 s to write
    run = Run(args)
    os.makedirs(run.out, exist_ok=True)
    for handler in list(log.handlers):  # main() may run more than once in a process (tests)
        log.removeHandler(handler)
    for handler in (logging.StreamHandler(),
                    logging.FileHandler(os.path.join(run.out, "profile_kernels.log"))):
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.info("device %s (system %s, sm %d), torch %s, budget %.1f min", run.device_name,
             run.system, run.sm, torch.__version__, args.budget_minutes)
    if not run.cuda:
        torch.set_num_threads(1)  # CPU runs are schema checks: avoid thread-pool contention
    torch.manual_seed(0)
    makers = {"gemm_perf": lambda: gemm_table(run),
              "context_attention_perf": lambda: attention_table(run, "context"),
              "generation_attention_perf": lambda: attention_table(run, "generation"),
              "moe_perf": lambda: moe_table(run)}
    tables = [OPS[o] for o in ops]
    statuses = {}
    for i, table in enumerate(tables):
        share = SHARES[table] / sum(SHARES[t] for t in tables[i:])  # of the time left
        deadline = time.monotonic() + max(0.0, (budget_end - time.monotonic()) * share)
        try:
            if table == "nccl_perf":
                rows, status = ([], "complete") if args.dry_run else comm_rows(run, deadline)
            else:
                cases, build = makers[table]()
                if args.dry_run:
                    print(f"{table}: {len(cases)} cases")
                    continue
                rows, status = sweep(run, table, cases, build, deadline)
        except Exception as exc:  # one table's failure must not cost the others
            run.note(f"{table}: failed: {first_line(exc)}")
            rows, status = [], "partial"
        if rows:
            write_table(run, table, rows)
            statuses[table] = (status, len(rows))
        if run.cuda:
            torch.cuda.empty_cache()
    if not args.dry_run:
        write_meta(run, statuses)
        write_readme(run, statuses, time.monotonic() - started)
        log.info("done in %.0f s: %s", time.monotonic() - started,
                 ", ".join(f"{t} {c} rows ({s})" for t, (s, c) in statuses.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
