"""``tv.NodeDef``: an operation as TF 1.x's ``NodeDef`` shows it (``name``, ``op``, ``input``,
``device``, ``attr``), what device functions of TF 1.x programs read
(``op.node_def.op in ["Variable", "VariableV2"]``). Plain data, built from an
:class:`~tensorvm.Operation` by ``op.node_def``.

>>> import tensorvm as tv
>>> with tv.Graph().as_default():
...     v = tv.Variable(1.0, name="v")
...     v.op.node_def.op, v.op.node_def.name, isinstance(v.op.node_def, tv.NodeDef)
('VariableV2', 'v', True)
"""
from __future__ import annotations

import dataclasses

__all__ = ["NodeDef"]


@dataclasses.dataclass(frozen=True)
class NodeDef:
    """One graph node: its name, op type, input names (``^name`` for a control input),
    device and attributes."""

    name: str = ""
    op: str = ""
    input: tuple = ()
    device: str = ""
    attr: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, op) -> NodeDef:
        """The NodeDef of operation ``op``."""
        ins = tuple(t.name.removesuffix(":0") for t in op.inputs)
        ins += tuple("^" + c.name for c in op.control_inputs)
        return cls(op.name, op.type, ins, op.device or "", dict(op.attrs or {}))
