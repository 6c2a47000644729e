"""The false-alarm sweep and the sensitivity of the fp64 rule, on real architectures, as a user runs them.

Each row is one architecture in one mode, checked through the ``compile_accuracy`` fixture in a
pytest run with ``--compile-accuracy`` (random weights: no download). Modes: ``bf16`` and
``fp16`` inference (``eval()``, ``no_grad``), and ``train`` (fp32, ``train()``, ``backward=True``
with a classification or the model's own loss: every parameter's gradient is judged). Dropout
stays as the architecture has it in ``train``: the check must align compiled and eager draws.

    python benchmarks/gpu_sweep.py --list
    python benchmarks/gpu_sweep.py --chunk 1/3 --out sweep/ -n 8          # one chunk of the sweep
    python benchmarks/gpu_sweep.py --summary sweep/                        # the table of all chunks
    python benchmarks/gpu_sweep.py --rows-from left.txt --chunk 1/4 --out sweep/ # rows left unjudged
    python benchmarks/gpu_sweep.py --inject 1e-3 --models resnet18,vit_tiny_patch16_224 --out sens/
    python benchmarks/gpu_sweep.py --path plain --models resnet18 --out plain/  # torch.compile itself

``--inject EPS`` installs a mutant of Inductor's lowering of an aten op (``--op``, by default
``add.Tensor``; ``mm.default``, ``convolution.default``, ...) that scales every floating result
by ``1 + EPS`` (in the test process and, through ``PYTEST_TORCHCOMPILE_SETUP``, in
every judging process; Inductor's caches off): a row that does not fail then missed an injected
error of relative size EPS. The sensitivity of a model, dtype and mode is the smallest EPS it
still catches.

Each chunk writes ``rows-<chunk>.jsonl`` (a line per row: model, mode, status, worst ratio,
seconds, message) and the pytest run's JSON report under ``--out``; the exit status is 0 whatever
the statuses (a measurement, not a gate). Needs a CUDA device and timm, torchvision, transformers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

TIMM = [
    "resnet18",
    "resnet50",
    "resnext50_32x4d",
    "seresnet50",
    "regnety_008",
    "regnetx_016",
    "rexnet_100",
    "ghostnet_100",
    "mobileone_s0",
    "mobilenetv2_100",
    "mobilenetv3_large_100",
    "efficientnet_b0",
    "efficientnet_b2",
    "mixnet_s",
    "mnasnet_100",
    "densenet121",
    "dpn68",
    "dla34",
    "hrnet_w18_small",
    "cspresnet50",
    "repvgg_a2",
    "convnext_nano",
    "convnextv2_atto",
    "eca_nfnet_l0",
    "poolformer_s12",
    "resmlp_12_224",
    "vit_tiny_patch16_224",
    "deit_tiny_patch16_224",
    "swin_tiny_patch4_window7_224",
    "levit_128",
    "pit_ti_224",
    "coat_lite_tiny",
    "edgenext_xx_small",
    "efficientformer_l1",
    "mobilevit_xxs",
    "inception_v3",
    "hgnetv2_b0",
    "gernet_s",
    "efficientvit_b0",
]
TORCHVISION = [
    "alexnet",
    "vgg11_bn",
    "squeezenet1_1",
    "googlenet",
    "shufflenet_v2_x1_0",
    "mobilenet_v3_small",
    "mnasnet0_5",
    "efficientnet_v2_s",
    "regnet_y_400mf",
    "regnet_x_400mf",
    "wide_resnet50_2",
    "convnext_tiny",
    "swin_t",
    "maxvit_t",
    "vit_b_32",
    "deeplabv3_mobilenet_v3_large",
    "fcn_resnet50",
]
TRANSFORMERS = [
    "bert",
    "distilbert",
    "albert",
    "electra",
    "gpt2",
    "opt",
    "gpt_neox",
    "bloom",
    "t5",
    "bart",
    "llama",
    "qwen2",
    "roberta",
]
MODES = ("bf16", "fp16", "train", "bf16train")
"""Inference in bf16 and fp16, training in fp32 and in bf16 (weights and inputs in bf16)."""
BATCH = 4


def rows(models: list[str] | None, modes: list[str]) -> list[str]:
    names = (
        [f"timm:{n}" for n in TIMM]
        + [f"tv:{n}" for n in TORCHVISION]
        + [f"hf:{n}" for n in TRANSFORMERS]
    )
    if models:
        names = [n for n in names if n.split(":", 1)[1] in models]
    return [f"{name}/{mode}" for name in names for mode in modes]


# --- building one row (imported by the generated test module) ---------------------------------


def _images(size: int, device: str) -> Any:
    import torch

    return torch.randn(BATCH, 3, size, size, generator=torch.Generator().manual_seed(0)).to(device)


def _classifier_loss(classes: int, device: str) -> Any:
    import torch
    import torch.nn.functional as F

    labels = (torch.arange(BATCH) * 7 % classes).to(device)
    return lambda logits: F.cross_entropy(
        (logits[0] if isinstance(logits, tuple) else logits).float(), labels
    )


def _transformer(name: str, device: str) -> tuple[Any, dict[str, Any], Any]:
    import torch
    import transformers as hf

    small = {
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "intermediate_size": 512,
        "vocab_size": 8000,
    }
    configs: dict[str, Any] = {
        "bert": (hf.BertConfig, hf.BertForMaskedLM, small),
        "distilbert": (
            hf.DistilBertConfig,
            hf.DistilBertForMaskedLM,
            {"dim": 256, "n_layers": 4, "n_heads": 4, "hidden_dim": 512, "vocab_size": 8000},
        ),
        "albert": (hf.AlbertConfig, hf.AlbertForMaskedLM, {**small, "embedding_size": 128}),
        "electra": (hf.ElectraConfig, hf.ElectraForMaskedLM, {**small, "embedding_size": 128}),
        "gpt2": (
            hf.GPT2Config,
            hf.GPT2LMHeadModel,
            {"n_embd": 256, "n_layer": 4, "n_head": 4, "vocab_size": 8000},
        ),
        "opt": (
            hf.OPTConfig,
            hf.OPTForCausalLM,
            {**small, "ffn_dim": 512, "word_embed_proj_dim": 256},
        ),
        "gpt_neox": (hf.GPTNeoXConfig, hf.GPTNeoXForCausalLM, small),
        "bloom": (
            hf.BloomConfig,
            hf.BloomForCausalLM,
            {"hidden_size": 256, "n_layer": 4, "n_head": 4, "vocab_size": 8000},
        ),
        "t5": (
            hf.T5Config,
            hf.T5ForConditionalGeneration,
            {
                "d_model": 256,
                "d_kv": 64,
                "d_ff": 512,
                "num_layers": 4,
                "num_heads": 4,
                "vocab_size": 8000,
            },
        ),
        "bart": (
            hf.BartConfig,
            hf.BartForConditionalGeneration,
            {
                "d_model": 256,
                "encoder_layers": 2,
                "decoder_layers": 2,
                "encoder_attention_heads": 4,
                "decoder_attention_heads": 4,
                "encoder_ffn_dim": 512,
                "decoder_ffn_dim": 512,
                "vocab_size": 8000,
            },
        ),
        "llama": (hf.LlamaConfig, hf.LlamaForCausalLM, {**small, "num_key_value_heads": 2}),
        "qwen2": (hf.Qwen2Config, hf.Qwen2ForCausalLM, {**small, "num_key_value_heads": 2}),
        # Its default dropout (0.1) kept: the check must align compiled and eager draws.
        "roberta": (hf.RobertaConfig, hf.RobertaForMaskedLM, small),
    }
    config_class, model_class, shape = configs[name]
    model = model_class(config_class(**shape))
    tokens = torch.randint(0, 8000, (BATCH, 32), generator=torch.Generator().manual_seed(0)).to(
        device
    )
    mask = torch.ones_like(tokens)
    mask[1, 24:] = 0
    kwargs = {
        "input_ids": tokens,
        "attention_mask": mask,
        "labels": tokens.masked_fill(mask == 0, -100),
    }
    if name in ("t5", "bart"):
        kwargs["decoder_input_ids"] = tokens
    return model, kwargs, lambda output: output.loss.float()


def build(
    row: str, device: str = os.environ.get("GPU_SWEEP_DEVICE", "cuda")
) -> tuple[Any, tuple[Any, ...], dict[str, Any], dict[str, Any], Any]:
    """(model, args, kwargs, check options, grad context) for one row: the model in the row's
    dtype and mode, on ``device``."""
    import contextlib

    import torch

    name, mode = row.split("/")
    library, arch = name.split(":", 1)
    torch.manual_seed(0)
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    if library == "timm":
        import timm

        model = timm.create_model(arch, pretrained=False)
        size = model.pretrained_cfg.get("input_size", (3, 224, 224))[-1]
        args, loss = (_images(size, device),), _classifier_loss(model.num_classes, device)
    elif library == "tv":
        import torchvision

        segmentation = arch.startswith(("deeplabv3", "fcn"))
        # No download: a segmentation model's backbone asks for pretrained weights by default.
        extra = {"weights_backbone": None} if segmentation else {}
        model = torchvision.models.get_model(arch, weights=None, **extra)
        size = 299 if arch == "inception_v3" else 224
        args, loss = (_images(size, device),), _classifier_loss(1000, device)
        if segmentation:  # a dict of per-pixel maps
            loss = lambda output: output["out"].float().square().mean()  # noqa: E731
    else:
        model, kwargs, loss = _transformer(arch, device)
    model = model.to(device)
    if mode in ("train", "bf16train"):
        if mode == "bf16train":
            model = model.to(torch.bfloat16)
            args = tuple(a.to(torch.bfloat16) if a.is_floating_point() else a for a in args)
        return (
            model.train(),
            args,
            kwargs,
            {"backward": True, "loss_fn": loss},
            contextlib.nullcontext(),
        )
    if library == "hf":
        kwargs.pop("labels")
    dtype = torch.bfloat16 if mode == "bf16" else torch.float16
    args = tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
    return model.to(dtype).eval(), args, kwargs, {}, torch.no_grad()


TEST_MODULE = """\
import json, os, time
import pytest
import gpu_sweep

ROWS = {rows!r}


@pytest.mark.parametrize("row", ROWS)
def test_row(compile_accuracy, row):
    model, args, kwargs, options, context = gpu_sweep.build(row)
    started = time.perf_counter()
    try:
        with context:
            compile_accuracy(model, *args, **kwargs, **options)
    finally:
        with open(os.path.join({out!r}, "seconds-" + os.environ.get("PYTEST_XDIST_WORKER", "main") + ".jsonl"), "a") as f:
            f.write(json.dumps({{"row": row, "seconds": round(time.perf_counter() - started, 1)}}) + "\\n")
"""

PLAIN_TEST_MODULE = """\
import json, os, time
import pytest
import torch
import gpu_sweep

ROWS = {rows!r}


@pytest.mark.parametrize("row", ROWS)
def test_row(row):
    model, args, kwargs, options, context = gpu_sweep.build(row)
    started = time.perf_counter()
    try:
        with context:
            output = torch.compile(model)(*args, **kwargs)
            if options.get("backward"):
                options["loss_fn"](output).backward()
    finally:
        with open(os.path.join({out!r}, "seconds-" + os.environ.get("PYTEST_XDIST_WORKER", "main") + ".jsonl"), "a") as f:
            f.write(json.dumps({{"row": row, "seconds": round(time.perf_counter() - started, 1)}}) + "\\n")
"""
"""The same rows as a suite that calls ``torch.compile`` itself (the plain path): a training row
calls backward on the row's loss."""

MUTANT = """\
import os

import torch
from torch._inductor import lowering

_EPS = float(os.environ["GPU_SWEEP_INJECT"])
_packet, _overload = os.environ.get("GPU_SWEEP_OP", "add.Tensor").split(".")
_OP = getattr(getattr(torch.ops.aten, _packet), _overload)
_lowered = lowering.lowerings[_OP]


def _scaled(*args, **kwargs):
    out = _lowered(*args, **kwargs)
    if isinstance(out, lowering.TensorBox) and out.get_dtype().is_floating_point:
        return lowering.lowerings[torch.ops.aten.mul.Tensor](out, 1.0 + _EPS)
    return out


lowering.lowerings[_OP] = _scaled
"""


def run_chunk(
    selected: list[str],
    out: Path,
    workers: int,
    inject: float | None,
    tag: str,
    minify: float | None = None,
    plain: bool = False,
) -> int:
    out.mkdir(parents=True, exist_ok=True)
    work = out / f"work-{tag}"
    work.mkdir(exist_ok=True)
    (work / f"test_sweep_{tag.replace('-', '_').replace('.', '_')}.py").write_text(
        (PLAIN_TEST_MODULE if plain else TEST_MODULE).format(rows=selected, out=str(out.resolve()))
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
        ),
    }
    if inject is not None:
        mutant = work / "add_mutant.py"
        mutant.write_text(MUTANT)
        (work / "conftest.py").write_text(f"exec(open({str(mutant)!r}).read())\n")
        env.update(
            GPU_SWEEP_INJECT=repr(inject),
            PYTEST_TORCHCOMPILE_SETUP=str(mutant),
            TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
        )
    report = out / f"report-{tag}.json"
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(work),
        "--compile-accuracy",
        "-p",
        "no:cacheprovider",
        "-q",
        *(
            ["--no-compile-accuracy-minify"]
            if minify is None
            else [f"--compile-accuracy-minify-timeout={minify}"]
        ),
        f"--compile-accuracy-report={report}",
        f"--compile-accuracy-dir={work / 'repros'}",
        "-W",
        "ignore",
        "--rootdir",
        str(work),
    ]
    if workers > 1:
        command += ["-n", str(workers)]
    return subprocess.run(command, env=env, cwd=work).returncode


def summary(out: Path) -> str:
    seconds = {}
    for path in out.glob("seconds-*.jsonl"):
        for line in path.read_text().splitlines():
            data = json.loads(line)
            seconds[data["row"]] = data["seconds"]
    results: dict[str, dict[str, Any]] = {}
    for path in sorted(out.glob("report-*.json")):
        for test in json.loads(path.read_text())["tests"]:
            row = test["nodeid"].split("[", 1)[1].rstrip("]")
            # A plain path's test has a check per failing graph beside the one of its passing
            # graphs: the row shows the one its status comes from.
            check = next(
                (check for check in test["checks"] if check["status"] == test["status"]),
                test["checks"][0] if test["checks"] else {},
            )
            failing = [leaf for leaf in check.get("leaves") or [] if not leaf["passed"]]
            floors = [
                leaf
                for leaf in check.get("leaves") or []
                if leaf["detail"].startswith("measured against")
            ]
            minified = check.get("minify") or {}
            stage = (
                f" [minified {minified['ops_before']} -> {minified['ops_after']} ops: "
                f"{minified.get('stage_summary') or minified.get('note') or minified.get('stop')}]"
                if minified
                else ""
            )
            # Outputs the half-precision resolution rule passed, and how far beyond eager's error
            # they were: what a cap on that rule's ratio would turn into failures.
            resolution = [
                leaf["rmse_compiled"] / leaf["rmse_eager"]
                for leaf in check.get("leaves") or []
                if "resolution" in leaf["detail"] and leaf.get("rmse_eager")
            ]
            results[row] = {
                "resolution": resolution,
                "status": test["status"],
                "ratio": check.get("worst_ratio"),
                "message": " ".join((check.get("message") or "").split())[:110] + stage,
                "failing": len(failing),
                "floored": len(floors),
            }
    lines = [f"{'row':46s} {'status':22s} {'ratio':>8s} {'s':>6s}  verdict"]
    counts: dict[str, int] = {}
    for row in sorted(set(results) | set(seconds)):
        result = results.get(
            row,
            {
                "status": "crash (no result)",
                "ratio": None,
                "message": "",
                "failing": 0,
                "floored": 0,
            },
        )
        counts[result["status"]] = counts.get(result["status"], 0) + 1
        ratio = result["ratio"]
        verdict = result["message"] or (
            f"{result['floored']} output(s) passed on the reversed-batch floor"
            if result["floored"]
            else ""
        )
        ratio_text = "-" if ratio is None else ratio if isinstance(ratio, str) else f"{ratio:.2f}"
        if result.get("resolution"):
            verdict += (
                f" [resolution rule passed {len(result['resolution'])} output(s), ratio up to "
                f"{max(result['resolution']):.2f}]"
            )
        lines.append(
            f"{row:46s} {result['status']:22s} {ratio_text:>8s} {seconds.get(row, 0):6.0f}  {verdict}"
        )
    false_alarms = sum(n for status, n in counts.items() if status.startswith("fail_"))
    lines.append("")
    lines.append(
        f"rows: {sum(counts.values())}; "
        + ", ".join(f"{status}: {n}" for status, n in sorted(counts.items()))
    )
    lines.append(
        f"compiler failures (false alarms unless shown otherwise): {false_alarms}; "
        f"crashes: {counts.get('crash (no result)', 0)}; unconfirmed: {counts.get('unconfirmed', 0)}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=textwrap.dedent(__doc__ or "").splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the rows and exit")
    parser.add_argument(
        "--models", type=lambda text: text.split(","), help="only these architectures"
    )
    parser.add_argument("--modes", type=lambda text: text.split(","), default=list(MODES))
    parser.add_argument(
        "--rows-from",
        type=Path,
        help="only the rows listed in this file, one a line (a sweep's rows a run left unjudged)",
    )
    parser.add_argument("--chunk", default="1/1", help="K/N: the K-th of N equal parts of the rows")
    parser.add_argument("--out", type=Path, default=Path("gpu-sweep"))
    parser.add_argument("-n", "--workers", type=int, default=8)
    parser.add_argument("--inject", type=float, help="scale Inductor's lowering of --op by 1 + EPS")
    parser.add_argument(
        "--op",
        default="add.Tensor",
        help="the aten op and overload --inject scales (add.Tensor, mm.default, addmm.default, "
        "bmm.default, convolution.default, sum.dim_IntList, rsqrt.default, exp.default, ...)",
    )
    parser.add_argument(
        "--summary", type=Path, help="print the table of a sweep's --out folder and exit"
    )
    parser.add_argument(
        "--minify",
        type=float,
        metavar="SECONDS",
        help="minify each failing row within this budget (default: no minification)",
    )
    parser.add_argument(
        "--path",
        choices=("fixture", "plain"),
        default="fixture",
        help="check each row through the compile_accuracy fixture, or as a test that calls "
        "torch.compile itself (the plain path)",
    )
    args = parser.parse_args(argv)
    if args.summary:
        print(summary(args.summary))
        return 0
    selected = rows(args.models, args.modes)
    if args.rows_from:
        listed = set(args.rows_from.read_text().split())
        selected = [row for row in selected if row in listed]
    index, count = (int(part) for part in args.chunk.split("/"))
    selected = selected[index - 1 :: count]
    if args.list:
        print("\n".join(selected) + f"\n{len(selected)} rows")
        return 0
    tag = (
        f"{index}-of-{count}"
        + ("" if args.path == "fixture" else "-plain")
        + ("" if args.inject is None else f"-inject-{args.op.replace('.', '_')}-{args.inject:g}")
    )
    if args.inject is not None:
        os.environ["GPU_SWEEP_OP"] = args.op
    run_chunk(selected, args.out, args.workers, args.inject, tag, args.minify, args.path == "plain")
    print(summary(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
