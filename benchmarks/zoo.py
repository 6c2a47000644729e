"""Real-model false-alarm audit: run ``check_model`` over real architectures and tabulate verdicts.

Every model is built from code with random weights (timm ``pretrained=False``, torchvision
``weights=None``, transformers from configs constructed here), so the audit needs no network.
For each model, dtype (fp32, bf16) and mode it records the check's status, the worst rmse ratio
(compiled vs eager, both against fp64), the time of a plain ``torch.compile(model)`` first call,
and the whole check's time as a multiple of that. Modes: ``inference`` (``model.eval()`` under
``torch.no_grad()``) and ``training`` (``model.train()``, dropout off, ``backward=True`` with the
model's loss: outputs and every parameter's gradient are judged).

A non-pass row is a *false alarm candidate*: either Inductor genuinely deviates (then the
minified repro explains it) or the oracle is wrong (then the oracle gets fixed). Missing
libraries (timm, torchvision, transformers) are skipped and listed as "not installed".

    python benchmarks/zoo.py --device cuda --json zoo.json --markdown zoo.md
    python benchmarks/zoo.py --device cuda --models bert,t5 --json zoo.json --merge   # in parts
    python benchmarks/zoo.py --device cpu --models bert,gpt2 --dtypes fp32 --tiny     # smoke test

JSON and Markdown are rewritten after every row, so a run cut off by a time limit keeps what it
measured; ``--merge`` adds to (and replaces rows of) an earlier JSON, so the audit can be split
over several commands into one table. The exit code is 0 whatever the statuses: this is a
measurement, not a gate.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime
import gc
import importlib
import itertools
import json
import math
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

try:
    import pytest_torchcompile  # noqa: F401  (installed, e.g. `pip install -e .`)
except ImportError:  # run from a checkout without installing: use the repository's copy
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_torchcompile.checking.masked import ProbeChildren
from pytest_torchcompile.checking.model import check_model
from pytest_torchcompile.checking.outcome import CheckOutcome, EagerRunError
from pytest_torchcompile.common.leaves import format_table
from pytest_torchcompile.common.settings import CheckOptions
from pytest_torchcompile.common.verdict import Status
from pytest_torchcompile.torch_internals import environment as torch_environment
from pytest_torchcompile.torch_internals.compiling import empty_compile_cache, reset

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
MODES = ("inference", "training")
NOT_INSTALLED = "not installed"
CRASH = "crash"
"""Row statuses besides ``oracle.Status``: the library is missing / the audit itself raised."""

LossFn = Callable[[Any], torch.Tensor]


# --- what one model needs to be checked -----------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """Input sizes. ``tiny`` shrinks transformer configs and images for smoke tests on a CPU."""

    device: torch.device
    tiny: bool = False
    batch: int = 2
    seq_len: int = 32

    @property
    def image(self) -> int:
        return 64 if self.tiny else 224


@dataclass
class Case:
    """A built model and how to call it: ``model(*args, **kwargs)`` for inference; training adds
    ``train_kwargs`` (labels, for models that compute their own loss) and reduces the output
    with ``loss``."""

    model: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    loss: LossFn
    train_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    library: str
    build: Callable[[Sizes], Case]


# --- builders -------------------------------------------------------------------------------
# Dropout is switched off everywhere: in training mode it makes eager disagree with itself
# (status eager_nondeterministic) and Inductor's RNG never matches eager's anyway. Training mode
# still differs from inference where it matters numerically (BatchNorm batch statistics).


def _images(sizes: Sizes) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(sizes.batch, 3, sizes.image, sizes.image, generator=generator).to(
        sizes.device
    )


def _classification_loss(sizes: Sizes, num_classes: int) -> LossFn:
    labels = (torch.arange(sizes.batch) * 7 % num_classes).to(sizes.device)
    return lambda logits: F.cross_entropy(logits.float(), labels)


def _timm(name: str) -> Callable[[Sizes], Case]:
    def build(sizes: Sizes) -> Case:
        import timm

        extra: dict[str, Any] = {"img_size": sizes.image} if name.startswith("vit") else {}
        model = timm.create_model(
            name, pretrained=False, drop_rate=0.0, drop_path_rate=0.0, **extra
        )
        return Case(model, (_images(sizes),), {}, _classification_loss(sizes, model.num_classes))

    return build


def _mobilenet_v3_large(sizes: Sizes) -> Case:
    import torchvision

    model = torchvision.models.mobilenet_v3_large(weights=None, dropout=0.0)
    return Case(model, (_images(sizes),), {}, _classification_loss(sizes, 1000))


def _torchvision(name: str) -> Callable[[Sizes], Case]:
    """A torchvision classifier by name (random weights); RegNet's padded strides and Swin's
    window shifts through in-place ops are what Inductor's re-runs and torch-level repros must
    keep."""

    def build(sizes: Sizes) -> Case:
        import torchvision

        model = torchvision.models.get_model(name, weights=None)
        return Case(model, (_images(sizes),), {}, _classification_loss(sizes, 1000))

    return build


def _tokens(sizes: Sizes, vocab_size: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (sizes.batch, sizes.seq_len), generator=generator).to(
        sizes.device
    )


def _padding_mask(sizes: Sizes) -> torch.Tensor:
    """All ones except the last quarter of the second sequence: masked softmax is a classic source
    of -inf/NaN differences, so the audit should see it."""
    mask = torch.ones(sizes.batch, sizes.seq_len, dtype=torch.long)
    if sizes.batch > 1:
        mask[1, sizes.seq_len - sizes.seq_len // 4 :] = 0
    return mask.to(sizes.device)


def _lm_inputs(sizes: Sizes, vocab_size: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inference kwargs, extra training kwargs) for a causal LM; padded positions get label -100."""
    input_ids, mask = _tokens(sizes, vocab_size), _padding_mask(sizes)
    kwargs = {"input_ids": input_ids, "attention_mask": mask, "use_cache": False}
    return kwargs, {"labels": input_ids.masked_fill(mask == 0, -100)}


def _own_loss(output: Any) -> torch.Tensor:
    """transformers models given ``labels`` compute the loss themselves."""
    return output.loss.float()


def _bert(sizes: Sizes) -> Case:
    from transformers import BertConfig, BertModel

    tiny: dict[str, Any] = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 1000,
    }
    config = BertConfig(
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **(tiny if sizes.tiny else {})
    )
    kwargs = {
        "input_ids": _tokens(sizes, config.vocab_size),
        "attention_mask": _padding_mask(sizes),
    }

    def loss(output: Any) -> torch.Tensor:
        # BertModel has no head: a quadratic of both outputs, so every parameter gets a gradient.
        return (
            output.last_hidden_state.float().square().mean()
            + output.pooler_output.float().square().mean()
        )

    return Case(BertModel(config), (), kwargs, loss)


def _gpt2(sizes: Sizes) -> Case:
    from transformers import GPT2Config, GPT2LMHeadModel

    tiny: dict[str, Any] = {
        "n_embd": 64,
        "n_layer": 2,
        "n_head": 4,
        "vocab_size": 1000,
        "n_positions": 128,
        "bos_token_id": 0,
        "eos_token_id": 0,
    }
    config = GPT2Config(
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **(tiny if sizes.tiny else {})
    )
    kwargs, train_kwargs = _lm_inputs(sizes, config.vocab_size)
    return Case(GPT2LMHeadModel(config), (), kwargs, _own_loss, train_kwargs)


def _t5(sizes: Sizes) -> Case:
    from transformers import T5Config, T5ForConditionalGeneration

    tiny: dict[str, Any] = {
        "d_model": 64,
        "d_kv": 16,
        "d_ff": 128,
        "num_layers": 2,
        "num_heads": 4,
        "vocab_size": 1000,
    }
    config = T5Config(dropout_rate=0.0, **(tiny if sizes.tiny else {}))  # default: t5-small's shape
    labels = _tokens(sizes, config.vocab_size, seed=1)
    kwargs = {
        "input_ids": _tokens(sizes, config.vocab_size),
        "attention_mask": _padding_mask(sizes),
        # An encoder-decoder needs decoder inputs; training derives them from the labels.
        "decoder_input_ids": labels,
        "use_cache": False,
    }
    return Case(T5ForConditionalGeneration(config), (), kwargs, _own_loss, {"labels": labels})


def _llama(sizes: Sizes) -> Case:
    from transformers import LlamaConfig, LlamaForCausalLM

    # A small Llama (grouped-query attention, RoPE, RMSNorm, SwiGLU); a 7B would not fit the budget.
    small = {
        "hidden_size": 512,
        "intermediate_size": 1408,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "vocab_size": 32000,
    }
    tiny = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
    }
    shape: dict[str, Any] = tiny if sizes.tiny else small
    config = LlamaConfig(max_position_embeddings=256, attention_dropout=0.0, **shape)
    kwargs, train_kwargs = _lm_inputs(sizes, config.vocab_size)
    return Case(LlamaForCausalLM(config), (), kwargs, _own_loss, train_kwargs)


MODELS: list[ModelSpec] = [
    ModelSpec("resnet50", "timm", _timm("resnet50")),
    ModelSpec("convnext_tiny", "timm", _timm("convnext_tiny")),
    ModelSpec("vit_base_patch16_224", "timm", _timm("vit_base_patch16_224")),
    ModelSpec("efficientnet_b0", "timm", _timm("efficientnet_b0")),
    ModelSpec("mobilenet_v3_large", "torchvision", _mobilenet_v3_large),
    ModelSpec("regnet_y_400mf", "torchvision", _torchvision("regnet_y_400mf")),
    ModelSpec("swin_t", "torchvision", _torchvision("swin_t")),
    ModelSpec("BertModel", "transformers", _bert),
    ModelSpec("GPT2LMHeadModel", "transformers", _gpt2),
    ModelSpec("T5ForConditionalGeneration", "transformers", _t5),
    ModelSpec("LlamaForCausalLM", "transformers", _llama),
]


# --- the two modes --------------------------------------------------------------------------
# Inference: model.eval() under torch.no_grad(). Training: model.train() and check_model's own
# backward=True with the model's loss, so outputs and every parameter's gradient are judged
# (forward and backward graphs both compiled by Inductor), as one training step computes them.


def _cast(value: Any, dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    return value


def prepare(
    case: Case, dtype: torch.dtype, mode: str, device: torch.device
) -> tuple[nn.Module, tuple[Any, ...], dict[str, Any]]:
    """The model to check and its inputs, on the device, in ``dtype`` and the mode's state."""
    model = case.model.to(device=device, dtype=dtype)
    args = tuple(_cast(a, dtype) for a in case.args)
    kwargs = {k: _cast(v, dtype) for k, v in case.kwargs.items()}
    if mode == "inference":
        return model.eval(), args, kwargs
    for module in model.modules():  # belt and braces: dropout a builder could not switch off
        if isinstance(module, nn.modules.dropout._DropoutNd):
            module.p = 0.0
    return model.train(), args, {**kwargs, **case.train_kwargs}


def _mode_options(options: CheckOptions, mode: str, case: Case) -> CheckOptions:
    return (
        options
        if mode == "inference"
        else dataclasses.replace(options, backward=True, loss_fn=case.loss)
    )


def _grad_mode(mode: str) -> Any:
    return torch.no_grad() if mode == "inference" else nullcontext()


def _run_step(
    call: Callable[..., Any],
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    mode: str,
    loss: LossFn,
) -> Any:
    """What the user's own code does in this mode: a forward through ``call`` (``model``
    compiled), and for training the gradients of ``model``'s parameters."""
    with _grad_mode(mode):
        output = call(*args, **kwargs)
        if mode == "training":
            params = [p for p in model.parameters() if p.requires_grad]
            return torch.autograd.grad(loss(output), params, allow_unused=True)
    return output


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Row:
    model: str
    library: str
    dtype: str
    mode: str
    status: str
    worst_ratio: float | None = None
    compile_seconds: float | None = None
    """Plain ``torch.compile(model)(*args)`` first call (training: with its backward) on a fresh
    dynamo and an empty cache directory: compile + one run."""
    check_seconds: float | None = None
    """The whole ``check_model``: eager twice, fp64, compile with capture, comparison, and the
    masked-deviation check of intermediates (unless --no-intermediates)."""
    check_compile_seconds: float | None = None
    """The check's own compile + compiled run (``CheckOutcome.compile_seconds``)."""
    message: str = ""
    reference: str = ""
    graphs: int | None = None
    failing_outputs: str = ""
    failing_graphs: list[str] = field(default_factory=list)
    error: str = ""
    run: str = ""
    """The date of the run that measured the row (its environment is ``runs[run]`` in the JSON)."""

    @property
    def overhead(self) -> float | None:
        if self.check_seconds is None or not self.compile_seconds:
            return None
        return self.check_seconds / self.compile_seconds

    @property
    def key(self) -> tuple[str, str, str]:
        return self.model, self.dtype, self.mode

    @property
    def skipped(self) -> bool:
        return self.status == NOT_INSTALLED


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _free_memory(device: torch.device) -> None:
    reset()
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


@contextmanager
def _cold_cache() -> Iterator[None]:
    """A fresh, empty Inductor/Triton cache directory for one measurement. Otherwise whichever of
    the plain run and the check compiles a kernel second finds the first one's FX graph, C++
    library or Triton binary on disk, and the overhead figure measures cache order, not the check."""
    with empty_compile_cache():
        yield


def _plain_compile_seconds(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    mode: str,
    loss: LossFn,
    device: torch.device,
) -> float:
    """What a user pays without the check: the first call of ``torch.compile(model)`` on a fresh
    dynamo (for training, with its backward)."""
    reset()
    fresh = copy.deepcopy(model)
    compiled = torch.compile(fresh)
    started = time.perf_counter()
    with _cold_cache():
        result = _run_step(compiled, fresh, args, kwargs, mode, loss)
    _synchronize(device)
    elapsed = time.perf_counter() - started
    del compiled, result
    reset()
    return elapsed


def _fill_from_outcome(row: Row, outcome: CheckOutcome) -> None:
    row.status = str(outcome.status)
    row.reference = outcome.reference
    # no_fp64_reference carries no message: the reference label says why fp64 was impossible.
    row.message = outcome.message or ("" if outcome.reference == "fp64" else outcome.reference)
    row.check_compile_seconds = outcome.compile_seconds
    row.graphs = len(outcome.graphs)
    if outcome.comparison is not None:
        row.worst_ratio = outcome.comparison.worst_ratio
        if not outcome.comparison.passed:
            row.failing_outputs = format_table(outcome.comparison.failing[:20])
    row.failing_graphs = [
        failing.graph.label + (f" ({failing.note})" if failing.note else "")
        for failing in outcome.failing_graphs
    ]


def _measure_into(
    row: Row,
    spec: ModelSpec,
    sizes: Sizes,
    options: CheckOptions,
    plain: bool,
    probe_children: ProbeChildren | None,
) -> None:
    torch.manual_seed(0)  # identical random weights for every dtype and mode of a model
    case = spec.build(sizes)
    model, args, kwargs = prepare(case, DTYPES[row.dtype], row.mode, sizes.device)
    started = time.perf_counter()
    with _cold_cache(), _grad_mode(row.mode):
        outcome = check_model(
            model,
            args,
            kwargs,
            _mode_options(options, row.mode, case),
            probe_children=probe_children,
        )
    _synchronize(sizes.device)
    row.check_seconds = time.perf_counter() - started
    _fill_from_outcome(row, outcome)
    del outcome
    _free_memory(sizes.device)
    # The plain compile runs second: the first compile of a model in a process also pays one-time
    # costs (lowerings and kernels met for the first time), and charging them to the check
    # rather than to plain keeps the overhead figure on the safe (high) side.
    if plain:
        try:
            row.compile_seconds = _plain_compile_seconds(
                model, args, kwargs, row.mode, case.loss, sizes.device
            )
        except Exception as error:  # the check's status already tells what went wrong
            row.error = f"plain torch.compile raised: {type(error).__name__}: {error}"[:2000]


def measure(
    spec: ModelSpec,
    dtype_name: str,
    mode: str,
    sizes: Sizes,
    options: CheckOptions,
    plain: bool = True,
    probe_children: ProbeChildren | None = None,
) -> Row:
    """One row; never raises (a crash of any kind becomes the row's status)."""
    row = Row(spec.name, spec.library, dtype_name, mode, status=CRASH)
    try:
        _measure_into(row, spec, sizes, options, plain, probe_children)
    except EagerRunError as error:
        row.status, row.message = str(Status.EAGER_FAIL), str(error)
    except Exception as error:
        row.message = f"{type(error).__name__}: {str(error).strip()[:500]}"
        row.error = traceback.format_exc()[-4000:]
    finally:
        # The model, its copies and the outcome's captured graphs (device tensors) died with
        # _measure_into's frame; return their memory before the next model.
        _free_memory(sizes.device)
    return row


def _warm_up(device: torch.device) -> None:
    """Pay one-time process costs (Inductor and AOTAutograd imports, compile workers, the CUDA
    context) before the first timed model, so that they do not inflate its plain compile time."""
    reset()
    with _cold_cache():
        layer = nn.Linear(8, 8).to(device)
        _run_step(
            torch.compile(layer),
            layer,
            (torch.randn(2, 8, device=device),),
            {},
            "training",
            lambda out: out.square().mean(),
        )
    _synchronize(device)
    reset()


# --- libraries ------------------------------------------------------------------------------


def missing_libraries(libraries: set[str]) -> dict[str, str]:
    """Library -> why it cannot be used (not installed, or its import fails)."""
    missing: dict[str, str] = {}
    for library in sorted(libraries):
        try:
            importlib.import_module(library)
        except Exception as error:
            missing[library] = f"{type(error).__name__}: {error}"
    return missing


# --- output ---------------------------------------------------------------------------------


def _number(value: float | None, digits: int) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.{digits}f}"


def markdown_table(rows: list[Row]) -> str:
    lines = [
        "| model | dtype | mode | status | worst ratio | compile s | overhead x |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.model} | {row.dtype} | {row.mode} | {row.status} | "
            f"{_number(row.worst_ratio, 2)} | {_number(row.compile_seconds, 1)} | "
            f"{_number(row.overhead, 1)} |"
        )
    return "\n".join(lines)


def progress_line(row: Row) -> str:
    line = f"  {row.model:28} {row.dtype:5} {row.mode:10} {row.status:22}"
    if row.skipped:
        return line
    return (
        f"{line} ratio {_number(row.worst_ratio, 2):>6}  compile {_number(row.compile_seconds, 1):>6}s  "
        f"check {_number(row.check_seconds, 1):>6}s  x{_number(row.overhead, 1)}"
    )


def report_text(rows: list[Row], missing: dict[str, str]) -> str:
    """The end-of-run summary: table, false alarm candidates, libraries skipped."""
    parts = [markdown_table(rows), ""]
    candidates = [row for row in rows if row.status != Status.PASS and not row.skipped]
    if candidates:
        parts.append(f"FALSE ALARM CANDIDATES ({len(candidates)} non-pass rows):")
        for row in candidates:
            parts.append(f"- {row.model} {row.dtype} {row.mode}: {row.status}: {row.message}")
            if row.failing_outputs:
                parts.append("    " + row.failing_outputs.replace("\n", "\n    "))
            if row.failing_graphs:
                parts.append(f"    failing graphs: {', '.join(row.failing_graphs)}")
    else:
        parts.append("FALSE ALARM CANDIDATES: none")
    for library, why in missing.items():
        names = sorted({row.model for row in rows if row.library == library})
        parts.append(f"NOT INSTALLED: {library} ({why}); skipped: {', '.join(names)}")
    return "\n".join(parts)


def environment(device: torch.device, sizes: Sizes, options: CheckOptions) -> dict[str, Any]:
    env: dict[str, Any] = dict(torch_environment.environment())
    for library in ("timm", "torchvision", "transformers"):
        try:
            env[library] = importlib.import_module(library).__version__
        except Exception:
            env[library] = NOT_INSTALLED
    # TF32 changes what fp32 eager (and so the allowed error) is on a GPU: record it.
    env.update(
        cudnn_allow_tf32=torch.backends.cudnn.allow_tf32,
        matmul_allow_tf32=torch.backends.cuda.matmul.allow_tf32,
        deterministic=torch.are_deterministic_algorithms_enabled(),
    )
    env.update(
        tol=options.tol if options.tol is not None else "default",
        intermediates=options.intermediates,
    )
    env.update(
        device=str(device),
        tiny=sizes.tiny,
        batch=sizes.batch,
        seq_len=sizes.seq_len,
        image=sizes.image,
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
    return env


def _row_json(row: Row) -> dict[str, Any]:
    data = asdict(row)
    data["overhead"] = row.overhead
    for key in ("worst_ratio", "overhead"):  # JSON has no inf
        if isinstance(data[key], float) and math.isinf(data[key]):
            data[key] = "inf"
    return data


def _row_from_json(data: dict[str, Any]) -> Row:
    data = {k: v for k, v in data.items() if k in Row.__dataclass_fields__}
    if data.get("worst_ratio") == "inf":
        data["worst_ratio"] = math.inf
    return Row(**data)


def load_previous(path: Path) -> tuple[list[Row], dict[str, dict[str, Any]]]:
    """The rows and runs (environment by date) already in a JSON file from an earlier run."""
    if not path.exists():
        return [], {}
    data = json.loads(path.read_text())
    return [_row_from_json(item) for item in data["rows"]], dict(data.get("runs", {}))


def merge_rows(previous: list[Row], new: list[Row]) -> list[Row]:
    """Previous rows with the ones measured again replaced, in the model table's order, so that a
    run split over several commands (``--merge``) ends in one table."""
    by_key = {row.key: row for row in previous}
    by_key.update({row.key: row for row in new})
    order = {spec.name: index for index, spec in enumerate(MODELS)}
    return sorted(
        by_key.values(),
        key=lambda r: (
            order.get(r.model, len(order)),
            list(DTYPES).index(r.dtype) if r.dtype in DTYPES else 9,
            r.mode,
        ),
    )


TABLE_NOTE = (
    "worst ratio: the largest rmse(compiled, fp64) / rmse(eager, fp64) over the judged outputs (and "
    "gradients, in training); `-` when every one is within allclose(tol), so no ratio is needed. "
    "compile s: a plain `torch.compile(model)` first call on a fresh dynamo and an empty cache "
    "(training: with its backward). overhead x: the whole check (eager twice, fp64, compile, "
    "comparison, intermediates) over compile s."
)


def write_outputs(
    args: argparse.Namespace, rows: list[Row], runs: dict[str, dict[str, Any]]
) -> None:
    """JSON: every row and the environment of each run that measured some (rows name it by date)."""
    if args.json:
        payload = {
            "environment": runs[max(runs)],
            "runs": runs,
            "rows": [_row_json(row) for row in rows],
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    if args.markdown:
        env = runs[max(runs)]
        caption = (
            f"{env.get('cuda_device') or env.get('cpu')}, torch {env['torch']}, "
            f"triton {env['triton']}, timm {env['timm']}, torchvision {env['torchvision']}, "
            f"transformers {env['transformers']}, {env['date'][:10]}"
            + (" (tiny configs)" if env["tiny"] else "")
            + (f"; merged from {len(runs)} runs" if len(runs) > 1 else "")
        )
        Path(args.markdown).write_text(f"{caption}\n\n{markdown_table(rows)}\n\n{TABLE_NOTE}\n")


# --- command line ---------------------------------------------------------------------------


def _csv(allowed: tuple[str, ...] | list[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        values = [v.strip() for v in text.split(",") if v.strip()]
        unknown = [v for v in values if v not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {list(allowed)}")
        return values

    return parse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu"
    )
    parser.add_argument(
        "--models",
        default="",
        help="comma-separated, case-insensitive: each starts a model name or a _-separated part of "
        "one, e.g. bert,t5,vit (default: all; see --list)",
    )
    parser.add_argument("--dtypes", type=_csv(tuple(DTYPES)), default=list(DTYPES))
    parser.add_argument("--modes", type=_csv(MODES), default=list(MODES))
    parser.add_argument(
        "--tol",
        type=float,
        default=None,
        help="the checks' tolerance (default: the plugin's, 1e-4 inference, 1e-3 training)",
    )
    parser.add_argument(
        "--no-intermediates",
        action="store_true",
        help="skip the masked-deviation check of every intermediate (on by default, "
        "as for users; one extra compile per graph)",
    )
    parser.add_argument(
        "--no-plain",
        action="store_true",
        help="skip the plain torch.compile timing (compile s, overhead x) to save time",
    )
    parser.add_argument(
        "--deterministic",
        action="store_true",
        help="torch.use_deterministic_algorithms (warn only): tells whether an "
        "eager_nondeterministic row comes from nondeterministic kernels",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="tiny transformer configs and 64x64 images (CPU smoke test, not the audit)",
    )
    parser.add_argument(
        "--json", metavar="PATH", help="write every row (messages, timings) as JSON"
    )
    parser.add_argument("--markdown", metavar="PATH", help="write the README table")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="merge into the rows already in --json (a run split over several commands)",
    )
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    args = parser.parse_args(argv)
    if args.merge and not args.json:
        parser.error("--merge needs --json")
    return args


def selected(models: str) -> list[ModelSpec]:
    """The models named by ``--models``: each needle must start the name or one of its
    ``_``-separated parts (a bare substring test would let ``t5`` pick resnet50)."""
    needles = [n.strip().lower() for n in models.split(",") if n.strip()]
    return [
        spec
        for spec in MODELS
        if not needles
        or any(re.search(rf"(^|_){re.escape(n)}", spec.name.lower()) for n in needles)
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    specs = selected(args.models)
    if args.list or not specs:
        if not specs:
            print(f"--models {args.models!r} matches no model; the models are:")
        print("\n".join(f"{spec.name} ({spec.library})" for spec in MODELS))
        return 0
    device = torch.device(args.device)
    if args.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts
        torch.use_deterministic_algorithms(True, warn_only=True)
    sizes = Sizes(device, tiny=args.tiny)
    options = CheckOptions(tol=args.tol, intermediates=not args.no_intermediates)
    missing = missing_libraries({spec.library for spec in specs})
    env = environment(device, sizes, options)
    previous, runs = load_previous(Path(args.json)) if args.merge else ([], {})
    runs[env["date"]] = env
    print(
        f"zoo: {len(specs)} models x {args.dtypes} x {args.modes} on {device} "
        f"(torch {torch.__version__}{', tiny configs' if args.tiny else ''})",
        flush=True,
    )

    rows: list[Row] = []
    _warm_up(device)
    probe_children = ProbeChildren()  # one child per device for every row, as in a test run
    try:
        for spec, dtype_name, mode in itertools.product(specs, args.dtypes, args.modes):
            if spec.library in missing:
                row = Row(
                    spec.name,
                    spec.library,
                    dtype_name,
                    mode,
                    NOT_INSTALLED,
                    message=missing[spec.library],
                )
            else:
                row = measure(
                    spec,
                    dtype_name,
                    mode,
                    sizes,
                    options,
                    plain=not args.no_plain,
                    probe_children=probe_children,
                )
            row.run = env["date"]
            rows.append(row)
            print(progress_line(row), flush=True)
            # Written after every row: a run cut off by a time limit keeps what it measured.
            write_outputs(args, merge_rows(previous, rows), runs)
    finally:
        probe_children.close()
    print()
    print(report_text(merge_rows(previous, rows), missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
