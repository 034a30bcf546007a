"""ACCELERATOR_FIELDS: one row per accelerator field, which the record, the JSON writer,
RawGpu and both backends follow (the cross-backend tests check what they read agrees)."""

from __future__ import annotations

from dataclasses import MISSING, fields

import pytest

from placement_native import Accelerator, _backend
from placement_native._fields import ACCELERATOR_FIELDS, PYNVML_QUERIES, SnapshotField
from placement_native._nvml_pynvml import _Reader
from placement_native._raw import RawGpu

needs_extension = pytest.mark.skipif(
    _backend.native_module is None, reason="the compiled backend is not active"
)
WITH_MEMBERS = [f for f in ACCELERATOR_FIELDS if f.members]


def test_the_record_has_the_tables_fields_in_its_order() -> None:
    assert [f.name for f in fields(Accelerator)] == [f.name for f in ACCELERATOR_FIELDS]


def test_a_field_read_as_absent_has_the_records_default() -> None:
    for f, row in zip(fields(Accelerator)[1:], ACCELERATOR_FIELDS[1:], strict=True):
        assert f.default is not MISSING, f.name
        assert f.default == row.absent, f.name


def test_a_gpu_with_nothing_read_carries_only_its_index_and_error() -> None:
    gpu = RawGpu.absent(3)
    assert (gpu.index, gpu.error, gpu.migs, gpu.processes) == (3, None, (), None)
    assert gpu.values == [3, *(f.absent for f in ACCELERATOR_FIELDS[1:])]


def _member_offset(path: str) -> tuple[int, int]:
    """(offset, size) of a member of pn_nvml_gpu in the compiled struct."""
    assert _backend.native_module is not None
    ffi = _backend.native_module.ffi
    ctype = ffi.typeof("pn_nvml_gpu")
    for name in path.split("."):
        ctype = dict(ctype.fields)[name].type
    return ffi.offsetof("pn_nvml_gpu", *path.split(".")), ffi.sizeof(ctype)


@needs_extension
@pytest.mark.parametrize("field", WITH_MEMBERS, ids=lambda f: f.name)
def test_a_fields_members_lie_in_its_part_of_the_c_entry(field: SnapshotField) -> None:
    identity_end, _ = _member_offset("has_handle")
    mig_table, _ = _member_offset("mig")
    for member in (*field.members, *([field.guard] if field.guard else [])):
        offset, _ = _member_offset(member)
        if field.part == "identity":
            assert offset < identity_end, member
        else:
            assert identity_end <= offset < mig_table, member


@needs_extension
@pytest.mark.parametrize("field", WITH_MEMBERS, ids=lambda f: f.name)
def test_a_fields_members_are_adjacent_in_struct_order(field: SnapshotField) -> None:
    """Its decode takes them as one stretch of what the entry unpacks to."""
    others = {
        m
        for f in ACCELERATOR_FIELDS
        if f is not field
        for m in (*f.members, *([f.guard] if f.guard else []))
    }
    spans = [_member_offset(m) for m in field.members]
    assert spans == sorted(spans)
    for member in others:
        offset, _ = _member_offset(member)
        assert not spans[0][0] < offset < spans[-1][0], member


def test_a_field_without_a_decode_is_one_member() -> None:
    for f in WITH_MEMBERS:
        assert f.decode is not None or len(f.members) == 1, f.name


def test_every_nvidia_ml_py_query_is_a_method_of_its_reader() -> None:
    for name, _ in PYNVML_QUERIES:
        assert callable(getattr(_Reader, name, None)), name


def test_nvidia_ml_py_asks_in_the_order_of_the_c_calls() -> None:
    """read_gpu in nvml_snapshot.c: name, UUID, PCI info, memory, NUMA node and CPUs, compute
    capability, MIG (or the GPU's processes), NVLinks, fabric."""
    assert [name for name, _ in PYNVML_QUERIES] == [
        "name",
        "uuid",
        "pci_bus_id",
        "memory",
        "numa_and_cpus",
        "compute_capability",
        "mig_and_processes",
        "nvlinks",
        "fabric",
    ]


def test_a_query_fills_its_rows_in_table_order() -> None:
    rows = dict(PYNVML_QUERIES)
    names = [f.name for f in ACCELERATOR_FIELDS]
    assert [names[k] for k in rows["memory"]] == ["memory_bytes", "memory_used_bytes"]
    assert [names[k] for k in rows["mig_and_processes"]] == ["mig", "mig_instances", "processes"]


def test_a_conversion_leaves_an_absent_value_as_it_is() -> None:
    """Readers skip converting a field that was not read."""
    for f in ACCELERATOR_FIELDS:
        if f.convert is not None:
            assert f.convert(f.absent) == f.absent, f.name
