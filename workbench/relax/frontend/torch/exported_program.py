"""``from_exported_program``: a ``torch.export`` program -> a Relax ``IRModule`` (TVM's
``relax.frontend.torch.from_exported_program``).

Steps (TVM's order):

1. ``ep.run_decompositions()`` (``run_ep_decomposition=True``): core ATen ops.
2. The support check, before anything is converted: every ``call_function`` node's target must
   have a converter (``_registry.CONVERTERS``) that accepts this use of it; otherwise
   :class:`~workbench.relax.frontend.common.OpNotImplemented` lists every unsupported op with
   the ``nn.Module`` path it sits in (``layer1.0.act``).
3. One Relax variable per user input (shape and dtype from the placeholder's ``meta["val"]``;
   a dynamic dim -- ``torch.export.Dim`` -- is a ``tir.SizeVar`` named after torch's symbol,
   ``s77``, shared by every input using it; its range goes to the function attrs
   ``tir_var_lower_bound`` / ``tir_var_upper_bound``). Parameters, buffers and lifted
   constants become ``relax.Constant`` s; with ``keep_params_as_input=True`` the parameters are
   function parameters after the inputs instead (named after their placeholders,
   ``p_conv1_weight``), ``main`` gets ``num_input`` and ``params`` (their values, NDArrays, in
   input-spec order; see ``relax.frontend.detach_params``). Buffers are always bound.
4. ``main``'s body is one dataflow block: each node is converted inside
   ``BlockBuilder.span_scope`` of its :class:`~workbench.relax.span.Source` (the fx node, its
   ATen op, its module path and type), so every call it emits records where it came from. Ops
   on constants only (a weight's transpose) are folded at import time.
5. Outputs: user outputs only (buffer mutations are dropped), always a tuple unless
   ``unwrap_unit_return_tuple=True`` and there is one; ``no_bind_return_tuple=True`` returns
   the tuple of separately bound outputs instead of one tuple-valued variable.
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping

import numpy as np

from workbench.ir.module import IRModule
from workbench.relax.block_builder import BlockBuilder
from workbench.relax.expr import Constant, Expr, Tuple, Var
from workbench.relax.frontend.common import Importer, Unsupported
from workbench.relax.frontend.torch._registry import Converter, Unavailable, load_all
from workbench.relax.span import Source, Span
from workbench.relax.struct_info import TensorStructInfo
from workbench.tir import op as tir_op
from workbench.tir.expr import IntImm, PrimExpr, SizeVar

_TORCH_DTYPES = {
    "float32": "float32", "float16": "float16", "float64": "float64", "bfloat16": "bfloat16",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
    "bool": "bool",
}


def torch_dtype(dtype: Any) -> str:
    """The Workbench dtype of a ``torch.dtype``; raises for dtypes Relax cannot hold."""
    name = str(dtype).replace("torch.", "")
    got = _TORCH_DTYPES.get(name)
    if got is None:
        raise NotImplementedError(f"PyTorch importer: dtype {dtype} is not supported")
    return got


def target_name(target: Any) -> str:
    """The converter-table key of an fx target (TVM's ``node.target.__name__``)."""
    return getattr(target, "__name__", str(target))


def module_of(node: Any) -> tuple[str, str]:
    """``(module path, module class name)`` of the innermost ``nn.Module`` the node sits in
    (``("layer1.0.conv1", "Conv2d")``); ``("", "")`` at the top level."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, cls = list(stack.values())[-1]
    cls_name = cls if isinstance(cls, str) else getattr(cls, "__name__", str(cls))
    return path, cls_name.rsplit(".", 1)[-1]


def where(node: Any) -> str:
    """Where a node sits, for messages: its module path, or the node at the top level."""
    path, cls = module_of(node)
    return f"{path} ({cls})" if path else f"the top-level forward (node {node.name})"


class ExportedProgramImporter(Importer):
    """Converts one ExportedProgram; converters reach the importer's state through it."""

    frontend = "PyTorch"

    def __init__(self, ep: Any, convert_map: Mapping[str, Converter]):
        super().__init__(convert_map)
        self.ep = ep
        self.sym_vars: dict[str, SizeVar] = {}

    # TVM's names for custom converters (``fn(node, importer)``).
    @property
    def block_builder(self) -> BlockBuilder:
        return self.bb

    def retrieve_args(self, node: Any) -> list[Any]:
        return list(self.value(node.args))

    # ---- values ---------------------------------------------------------------------------------

    def value(self, a: Any) -> Any:
        """A node argument with fx Nodes replaced by their converted values."""
        import torch.fx
        if isinstance(a, torch.fx.Node):
            v = self.env[a]
            if isinstance(v, Unavailable):
                raise NotImplementedError(f"node {a.name}: {v.what} is not available")
            return v
        if isinstance(a, (list, tuple)):
            return type(a)(self.value(x) for x in a)
        if isinstance(a, dict):
            return {k: self.value(v) for k, v in a.items()}
        return a

    def meta_val(self, a: Any) -> Any:
        """The FakeTensor (or SymInt / value) torch.export recorded for a node argument."""
        import torch.fx
        return a.meta.get("val") if isinstance(a, torch.fx.Node) else a

    def out_dtype(self, node: Any) -> str:
        """The dtype of the node's (first) tensor result."""
        val = node.meta.get("val")
        if isinstance(val, (list, tuple)):
            val = val[0]
        return torch_dtype(val.dtype)

    def prim(self, v: Any) -> PrimExpr:
        """A TIR int64 expression of an int, SymInt, sympy expression or PrimExpr."""
        if isinstance(v, PrimExpr):
            return v
        if isinstance(v, (int, np.integer)):
            return IntImm("int64", int(v))
        node = getattr(v, "node", None)
        if node is not None and hasattr(node, "expr"):
            return self.sympy_to_tir(node.expr)
        return self.sympy_to_tir(v)

    def sympy_to_tir(self, e: Any) -> PrimExpr:
        import sympy
        if isinstance(e, sympy.Integer):
            return IntImm("int64", int(e))
        if isinstance(e, sympy.Symbol):
            name = str(e)
            var = self.sym_vars.get(name)
            if var is None:
                var = self.sym_vars[name] = SizeVar(name, "int64")
            return var
        args = [self.sympy_to_tir(a) for a in e.args]
        fname = type(e).__name__
        if isinstance(e, sympy.Add):
            return _fold(tir_op.add, args)
        if isinstance(e, sympy.Mul):
            return _fold(tir_op.mul, args)
        if fname == "FloorDiv":
            return tir_op.floordiv(args[0], args[1])
        if fname in ("Mod", "PythonMod"):
            return tir_op.floormod(args[0], args[1])
        raise NotImplementedError(f"PyTorch importer: symbolic shape expression {e} "
                                  f"({fname}) is not supported")

    def dims(self, shape: Any) -> tuple[PrimExpr, ...]:
        return tuple(self.prim(d) for d in shape)

    # ---- the program ------------------------------------------------------------------------------

    def _support_uses(self) -> Iterator[tuple[Any, str, str, str] | Unsupported]:
        for node in self.ep.graph.nodes:
            if node.op in ("placeholder", "output", "get_attr"):
                continue
            if node.op != "call_function":
                yield Unsupported(f"{node.op} {node.target}", where(node),
                                  "only call_function nodes are converted")
            else:
                yield node, target_name(node.target), str(node.target), where(node)

    def input_sinfo(self, node: Any) -> TensorStructInfo:
        import torch
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise NotImplementedError(f"PyTorch importer: input {node.name!r} is a "
                                      f"{type(val).__name__}; only tensor inputs are supported")
        return TensorStructInfo(self.dims(val.shape), torch_dtype(val.dtype))

    def tensor_value(self, spec_target: str) -> Any:
        ep = self.ep
        for table in (ep.state_dict, ep.constants):
            if spec_target in table:
                return table[spec_target]
        buffers = dict(ep.named_buffers())
        if spec_target in buffers:
            return buffers[spec_target]
        raise KeyError(f"PyTorch importer: no tensor for {spec_target!r} in the program")

    def run(self, keep_params_as_input: bool, unwrap_unit_return_tuple: bool,
            no_bind_return_tuple: bool) -> IRModule:
        from torch.export.graph_signature import InputKind
        self.check_support()
        spec_of = {s.arg.name: s for s in self.ep.graph_signature.input_specs}
        inputs: list[Var] = []
        params: list[Var] = []
        param_values: list[Any] = []
        for node in self.ep.graph.nodes:
            if node.op != "placeholder":
                continue
            spec = spec_of.get(node.name)
            kind = spec.kind if spec is not None else InputKind.USER_INPUT
            if kind == InputKind.USER_INPUT:
                var = Var(node.name, self.input_sinfo(node))
                inputs.append(var)
                self.env[node] = var
                continue
            if kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                raise ValueError(f"PyTorch importer: unsupported input kind {kind} "
                                 f"({node.name})")
            data = _to_numpy(self.tensor_value(spec.target))
            if kind == InputKind.PARAMETER and keep_params_as_input:
                var = Var(node.name, TensorStructInfo(data.shape, str(data.dtype)))
                params.append(var)
                param_values.append(data)
                self.env[node] = var
            else:
                self.env[node] = Constant(data)
        attrs: dict[str, Any] = {"num_input": len(inputs)}
        attrs.update(self._bounds())
        if keep_params_as_input:
            from workbench.runtime.ndarray import tensor
            attrs["params"] = tuple(tensor(v) for v in param_values)
        with self.bb.function("main", inputs + params, attrs=attrs):
            with self.bb.dataflow():
                outputs = self._convert_nodes()
                result = self._emit_outputs(outputs, unwrap_unit_return_tuple,
                                            no_bind_return_tuple)
            self.bb.emit_func_output(result)
        return self.bb.get()

    def _bounds(self) -> dict[str, Any]:
        lower: dict[str, int] = {}
        upper: dict[str, int] = {}
        for sym, rng in (getattr(self.ep, "range_constraints", None) or {}).items():
            name = str(sym)
            if not getattr(sym, "is_Symbol", False):
                continue
            lo, hi = rng.lower, rng.upper
            if getattr(lo, "is_finite", True) and lo is not None:
                try:
                    lower[name] = int(lo)
                except TypeError:
                    pass
            try:
                if getattr(hi, "is_finite", False) or isinstance(hi, int):
                    upper[name] = int(hi)
            except TypeError:
                pass
        out: dict[str, Any] = {}
        if lower:
            out["tir_var_lower_bound"] = lower
        if upper:
            out["tir_var_upper_bound"] = upper
        return out

    def _convert_nodes(self) -> list[Any]:
        output_values: list[Any] = []
        for node in self.ep.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                output_values = list(_flatten(self.value(node.args[0])))
                break
            if node.op == "get_attr":
                self.env[node] = Constant(_to_numpy(getattr(self.ep.graph_module, node.target)))
                continue
            self.env[node] = self._convert(node)
        return self._user_outputs(output_values)

    def _convert(self, node: Any) -> Any:
        conv = self.convert_map[target_name(node.target)]
        path, cls = module_of(node)
        span = Span((Source("torch", node.name, str(node.target), path, cls),))
        try:
            with self.bb.span_scope(span):
                args = self.value(node.args)
                kwargs = self.value(dict(node.kwargs))
                out = conv.fn(self, node, *args, **kwargs)
                return self.emit(out, node.name) if isinstance(out, Expr) else out
        except Exception as err:
            err.add_note(f"PyTorch importer: while converting node {node.name} "
                         f"({node.target}) at {where(node)}")
            raise

    def _user_outputs(self, values: list[Any]) -> list[Any]:
        from torch.export.graph_signature import OutputKind
        specs = self.ep.graph_signature.output_specs
        if len(specs) == len(values):
            values = [v for v, s in zip(values, specs)
                      if s.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)]
        for v in values:
            if not isinstance(v, Expr):
                raise NotImplementedError(f"PyTorch importer: the program returns a "
                                          f"{type(v).__name__} ({v!r}); only tensors are "
                                          "supported as outputs")
        return values

    def _emit_outputs(self, outputs: list[Any], unwrap: bool, no_bind: bool) -> Any:
        bb = self.bb
        if unwrap and len(outputs) == 1:
            return bb.emit_output(outputs[0])
        if no_bind:
            return Tuple(tuple(bb.emit_output(o) for o in outputs))
        return bb.emit_output(Tuple(tuple(outputs)))


def _fold(fn: Any, args: list[PrimExpr]) -> PrimExpr:
    out = args[0]
    for a in args[1:]:
        out = fn(out, a)
    return out


def _flatten(v: Any):
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _flatten(x)
    else:
        yield v


def _to_numpy(t: Any) -> np.ndarray:
    import torch
    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    t = t.detach().cpu()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.dtype == torch.bfloat16:
        raise NotImplementedError("PyTorch importer: bfloat16 weights are not supported")
    return t.contiguous().numpy().copy()


def from_exported_program(exported_program: Any, *, keep_params_as_input: bool = False,
                          unwrap_unit_return_tuple: bool = False,
                          no_bind_return_tuple: bool = False,
                          custom_convert_map: Mapping[str, Any] | None = None,
                          run_ep_decomposition: bool = True) -> IRModule:
    """Import a ``torch.export.ExportedProgram`` as an IRModule with a Relax function ``main``.

    ``main`` takes the program's user inputs (then, with ``keep_params_as_input``, its
    parameters) and returns a tuple of its outputs (the bare output with
    ``unwrap_unit_return_tuple`` and a single output). Weights are bound as constants unless
    ``keep_params_as_input``. ``custom_convert_map`` maps target names
    (``"sigmoid.default"``) to ``fn(node, importer) -> relax value``, overriding the built-in
    converters (TVM's calling convention). ``run_ep_decomposition`` runs PyTorch's default
    decompositions first, as TVM does. Raises
    :class:`~workbench.relax.frontend.common.OpNotImplemented` listing every unsupported op
    and where it sits before converting anything. See the module docstring for the details.
    """
    try:
        import torch
    except ImportError as err:  # pragma: no cover - the models extra is missing
        raise ImportError("from_exported_program needs PyTorch: pip install "
                          "'workbench[models]'") from err
    if not isinstance(exported_program, torch.export.ExportedProgram):
        raise TypeError(f"from_exported_program expects a torch.export.ExportedProgram (from "
                        f"torch.export.export(model, args)), got "
                        f"{type(exported_program).__name__}")
    ep = exported_program
    if run_ep_decomposition:
        ep = ep.run_decompositions()
    table = dict(load_all())
    for name, fn in (custom_convert_map or {}).items():
        table[name] = Converter(_custom(fn))
    importer = ExportedProgramImporter(ep, table)
    return importer.run(keep_params_as_input, unwrap_unit_return_tuple, no_bind_return_tuple)


def _custom(fn: Any) -> Any:
    def call(imp: ExportedProgramImporter, node: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(node, imp)
    return call


__all__ = ["from_exported_program", "ExportedProgramImporter", "torch_dtype", "module_of",
           "target_name"]
