"""Facts about ops live in their OpDef (issue 22 item 5): how an op runs on a GPU, whether its
kernel takes Arrow, whether it only reads its state. Declared by op name, never by the module
a kernel happens to live in."""
import pytest

import tensorvm as tv
from tensorvm.framework import op_registry
from tensorvm.framework.op_registry import declare_gpu, get_op_def, register_op, registry
from tensorvm.ops.mapreduce import mapreduce_ops
from tensorvm.vm.kernels import array_api


@pytest.fixture
def new_op_names():
    """Op type names a test registers or declares, removed from the table afterwards."""
    names = []
    yield names
    for n in names:
        op_registry._REGISTRY.pop(n, None)
        op_registry._DECLARED_GPU.pop(n, None)


def _kernel_in_module(module: str):
    def k(x):
        return x
    k.__module__ = module
    return k


def test_every_declared_op_is_registered():
    import tensorvm.jobs  # noqa: F401  (registers the input pipelines' and savers' ops)
    import tensorvm.mapreduce  # noqa: F401
    op_registry.load_all_ops()  # the op modules `import tensorvm` leaves for first use
    assert sorted(array_api.DECLARED - set(registry)) == []


def test_gpu_class_follows_the_op_not_the_module_of_its_kernel(new_op_names):
    # a kernel moved to a module no table names (as a split would) keeps its GPU class
    new_op_names += ["FactsMovedNeg", "FactsMovedRandom"]
    declare_gpu("FactsMovedNeg", gpu="same")
    declare_gpu(["FactsMovedRandom"], gpu="host")
    shape = lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)]  # noqa: E731
    neg = _kernel_in_module("tensorvm.ops.math.a_module_split_off")
    register_op("FactsMovedNeg", shape, neg)
    register_op("FactsMovedRandom", shape, _kernel_in_module("tensorvm.ops.math.random_ops"))
    assert array_api.install() == 2
    assert get_op_def("FactsMovedNeg").gpu == "same"
    assert get_op_def("FactsMovedNeg").kernels["GPU"] is neg
    assert get_op_def("FactsMovedRandom").kernels["GPU"].on_host
    assert "FactsMovedNeg" not in array_api.undecided()


def test_gpu_facts_given_at_registration(new_op_names):
    new_op_names += ["FactsSame", "FactsHostOnly"]
    shape = lambda inputs, attrs: []  # noqa: E731
    register_op("FactsSame", shape, _kernel_in_module("tensorvm.x"), gpu="same")
    register_op("FactsHostOnly", shape, _kernel_in_module("tensorvm.x"), cpu_only="because")
    array_api.install()
    assert "GPU" in get_op_def("FactsSame").kernels
    assert get_op_def("FactsHostOnly").cpu_only == "because"
    assert "GPU" not in get_op_def("FactsHostOnly").kernels


def test_gpu_facts_are_checked(new_op_names):
    new_op_names += ["FactsBad", "FactsDeclared"]
    shape = lambda inputs, attrs: []  # noqa: E731
    with pytest.raises(ValueError, match="gpu must be one of"):
        register_op("FactsBad", shape, gpu="device")
    with pytest.raises(ValueError, match="cannot be CPU-only"):
        register_op("FactsBad", shape, gpu="same", cpu_only="because")
    with pytest.raises(ValueError, match="needs a GPU class or a CPU-only reason"):
        declare_gpu("FactsBad")
    declare_gpu("FactsDeclared", cpu_only="host memory")
    with pytest.raises(ValueError, match="its family declared"):
        register_op("FactsDeclared", shape, gpu="same")
    with pytest.raises(ValueError, match="cannot be CPU-only"):
        declare_gpu("MatMul", cpu_only="because")  # it has a GPU kernel


def test_the_legacy_families_keep_their_gpu_classes():
    assert get_op_def("MatMul").gpu == "same"
    assert get_op_def("RandomUniform").gpu == "host"
    assert "string" in get_op_def("StringJoin").cpu_only
    assert "map-reduce" in get_op_def("MRGroupReduce").cpu_only
    assert get_op_def("Const").gpu == ""  # a GPU kernel of its own (array_api.OVERRIDES)


def test_arrow_is_a_fact_of_the_op():
    assert get_op_def("StringSplitV2").arrow and get_op_def("MRGroupReduce").arrow
    assert get_op_def("StringLower").arrow and get_op_def("MRToNumpy").arrow
    assert not get_op_def("StringJoin").arrow and not get_op_def("MRReadSplits").arrow
    with tv.Graph().as_default() as g:
        lines = tv.placeholder(tv.string, [None])
        n0 = len(g.get_operations())
        tv.strings.lower(lines)
        assert mapreduce_ops.arrow_safe(g.get_operations()[n0:], [lines])
        n0 = len(g.get_operations())
        tv.strings.join([lines, lines])
        assert not mapreduce_ops.arrow_safe(g.get_operations()[n0:], [lines])


def test_reads_only_marks_the_variable_reads():
    reads = sorted(t for t, d in registry.items() if d.reads_only)
    assert reads == ["IsVariableInitialized", "VariableRead", "VariableV2"]
    assert all(registry[t].stateful for t in reads)
    assert not get_op_def("Assign").reads_only

