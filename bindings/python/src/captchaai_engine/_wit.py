"""Fast calls into a component function through wasmtime's C API.

wasmtime-py's stock ``Func.__call__`` re-reads the function type and every nested record, variant
and option type through FFI on each call, and decides per call whether a variant is "tagged" (a
``Variant``) or returned bare, depending on whether its cases differ by Python type (measured:
~390 µs for one ``poll-output``; see ../shared/docs/toolchain-wasm-hosts.md). Here the types are
read once per function and compiled into plain Python converters, and every value has one fixed
shape:

- record: ``dict`` keyed by the WIT field names (kebab-case);
- variant and result: ``(tag, payload)`` (payload ``None`` for a case without one);
- enum: the case name; option: ``None`` or the value; ``list<u8>``: ``bytes``;
- resource: ``wasmtime.component.ResourceAny`` (params are borrowed: the handle stays usable).

This module uses wasmtime-py's low-level ``_ffi`` bindings (the C API), which is why the package
pins the wasmtime version; the golden-vector tests exercise every converter used here.
"""

from __future__ import annotations

import ctypes
import struct
from ctypes import byref
from typing import Any, Callable, List, Optional, Tuple

from wasmtime import WasmtimeError, _bindings, _ffi as ffi
from wasmtime.component import ResourceAny, _types as T
from wasmtime.component._enter import maybe_raise_last_exn

_VAL = ffi.wasmtime_component_val_t
_VAL_SIZE = ctypes.sizeof(_VAL)
_UNION_OFFSET = _VAL.of.offset


def _kind(name: str) -> int:
    return getattr(ffi, "WASMTIME_COMPONENT_" + name).value


K_BOOL = _kind("BOOL")
K_U8, K_U16, K_U32, K_U64 = _kind("U8"), _kind("U16"), _kind("U32"), _kind("U64")
K_S8, K_S16, K_S32, K_S64 = _kind("S8"), _kind("S16"), _kind("S32"), _kind("S64")
K_F32, K_F64 = _kind("F32"), _kind("F64")
K_STRING, K_LIST, K_RECORD, K_TUPLE = _kind("STRING"), _kind("LIST"), _kind("RECORD"), _kind("TUPLE")
K_VARIANT, K_ENUM, K_OPTION, K_RESULT = _kind("VARIANT"), _kind("ENUM"), _kind("OPTION"), _kind("RESULT")
K_RESOURCE = _kind("RESOURCE")

Lift = Callable[[bytes, int, int], Any]
Lower = Callable[[Any, Any], None]


# ----------------------------------------------------------------------------------------------
# Lifting: C value -> Python, reading the C structures' bytes directly (one `string_at` per
# allocation instead of a ctypes object per field access). A lifter gets `(buf, off, base)`:
# the value's bytes start at `buf[off]`, and `base` is the C address of `buf[0]`. The whole C
# value is freed by the caller afterwards, except resources, which are moved out (their slot
# becomes a bool so the free skips them). Offsets and sizes come from wasmtime-py's ctypes layout.

_string_at = ctypes.string_at
_UNION = _VAL.of.offset
_ENTRY = ffi.wasmtime_component_valrecord_entry
_ENTRY_SIZE = ctypes.sizeof(_ENTRY)
_ENTRY_VAL = _ENTRY.val.offset
_VEC_SIZE = ffi.wasm_byte_vec_t.size.offset
_VEC_DATA = ffi.wasm_byte_vec_t.data.offset
_VARIANT_VAL = ffi.wasmtime_component_valvariant.val.offset
_RESULT_VAL = ffi.wasmtime_component_valresult.val.offset
_LIST_SIZE = ffi.wasmtime_component_vallist.size.offset
_LIST_DATA = ffi.wasmtime_component_vallist.data.offset
_RECORD_SIZE = ffi.wasmtime_component_valrecord.size.offset
_RECORD_DATA = ffi.wasmtime_component_valrecord.data.offset
_SIZE_T = struct.Struct("@N" if ctypes.sizeof(ctypes.c_size_t) == ctypes.sizeof(ctypes.c_void_p) else "@Q")
_PTR = struct.Struct("@P")
if ctypes.sizeof(ctypes.c_size_t) != _SIZE_T.size:  # pragma: no cover - exotic platforms
    raise ImportError("unexpected size_t layout")
_size_at = _SIZE_T.unpack_from
_ptr_at = _PTR.unpack_from


def _text_at(buf: bytes, off: int) -> str:
    """A `wasm_name_t` at `buf[off]` as text."""
    size = _size_at(buf, off + _VEC_SIZE)[0]
    return _string_at(_ptr_at(buf, off + _VEC_DATA)[0], size).decode("utf-8") if size else ""


def _scalar(fmt: str) -> Lift:
    unpack = struct.Struct("@" + fmt).unpack_from
    return lambda buf, off, base: unpack(buf, off + _UNION)[0]


def lifter(ty: Any) -> Lift:
    """A converter from a C ``wasmtime_component_val_t`` of type ``ty`` to a Python value."""
    if isinstance(ty, T.Bool):
        return lambda buf, off, base: buf[off + _UNION] != 0
    for cls, fmt in ((T.U8, "B"), (T.U16, "H"), (T.U32, "I"), (T.U64, "Q"), (T.S8, "b"), (T.S16, "h"),
                     (T.S32, "i"), (T.S64, "q"), (T.F32, "f"), (T.F64, "d")):
        if isinstance(ty, cls):
            return _scalar(fmt)
    if isinstance(ty, (T.String, T.EnumType)):
        return lambda buf, off, base: _text_at(buf, off + _UNION)
    if isinstance(ty, T.RecordType):
        fields = [(name, lifter(fty), i * _ENTRY_SIZE + _ENTRY_VAL) for i, (name, fty) in enumerate(ty.fields)]
        total = len(fields) * _ENTRY_SIZE

        def lift_record(buf: bytes, off: int, base: int) -> dict:
            data = _ptr_at(buf, off + _UNION + _RECORD_DATA)[0]
            entries = _string_at(data, total)
            return {name: lift(entries, at, data) for name, lift, at in fields}

        return lift_record
    if isinstance(ty, T.VariantType):
        cases = {name: (lifter(cty) if cty is not None else None) for name, cty in ty.cases}

        def lift_variant(buf: bytes, off: int, base: int) -> Tuple[str, Any]:
            tag = _text_at(buf, off + _UNION)
            lift = cases[tag]
            if lift is None:
                return (tag, None)
            ptr = _ptr_at(buf, off + _UNION + _VARIANT_VAL)[0]
            return (tag, lift(_string_at(ptr, _VAL_SIZE), 0, ptr))

        return lift_variant
    if isinstance(ty, T.OptionType):
        inner = lifter(ty.payload)

        def lift_option(buf: bytes, off: int, base: int) -> Any:
            ptr = _ptr_at(buf, off + _UNION)[0]
            return inner(_string_at(ptr, _VAL_SIZE), 0, ptr) if ptr else None

        return lift_option
    if isinstance(ty, T.ResultType):
        ok = lifter(ty.ok) if ty.ok is not None else None
        err = lifter(ty.err) if ty.err is not None else None

        def lift_result(buf: bytes, off: int, base: int) -> Tuple[str, Any]:
            is_ok = buf[off + _UNION] != 0
            lift = ok if is_ok else err
            if lift is None:
                return ("ok" if is_ok else "err", None)
            ptr = _ptr_at(buf, off + _UNION + _RESULT_VAL)[0]
            return ("ok" if is_ok else "err", lift(_string_at(ptr, _VAL_SIZE), 0, ptr))

        return lift_result
    if isinstance(ty, T.ListType):
        element = ty.element
        if isinstance(element, T.U8):
            def lift_bytes(buf: bytes, off: int, base: int) -> bytes:
                n = _size_at(buf, off + _UNION + _LIST_SIZE)[0]
                if n == 0:
                    return b""
                # `n` values of _VAL_SIZE bytes, each with its u8 at the union.
                raw = _string_at(_ptr_at(buf, off + _UNION + _LIST_DATA)[0], n * _VAL_SIZE)
                return raw[_UNION::_VAL_SIZE]

            return lift_bytes
        inner = lifter(element)

        def lift_list(buf: bytes, off: int, base: int) -> list:
            n = _size_at(buf, off + _UNION + _LIST_SIZE)[0]
            if n == 0:
                return []
            data = _ptr_at(buf, off + _UNION + _LIST_DATA)[0]
            items = _string_at(data, n * _VAL_SIZE)
            return [inner(items, i * _VAL_SIZE, data) for i in range(n)]

        return lift_list
    if isinstance(ty, T.TupleType):
        elements = [lifter(e) for e in ty.elements]

        def lift_tuple(buf: bytes, off: int, base: int) -> tuple:
            data = _ptr_at(buf, off + _UNION + _LIST_DATA)[0]  # a tuple is laid out as a list
            items = _string_at(data, len(elements) * _VAL_SIZE)
            return tuple(lift(items, i * _VAL_SIZE, data) for i, lift in enumerate(elements))

        return lift_tuple
    if isinstance(ty, (T.OwnType, T.BorrowType)):
        def lift_resource(buf: bytes, off: int, base: int) -> ResourceAny:
            v = _VAL.from_address(base + off)
            ptr = ffi.take_pointer(v.of, "resource")
            v.kind = K_BOOL
            v.of.boolean = False
            return ResourceAny._from_ptr(ptr)

        return lift_resource
    raise TypeError(f"unsupported component result type {type(ty).__name__}")


# ----------------------------------------------------------------------------------------------
# Lowering: Python -> C value, written into a zeroed `wasmtime_component_val_t`. A lowerer either
# fills the value completely or raises and leaves it untouched (a bool), so cleanup is uniform.

# The C functions called on every engine call, taken without wasmtime-py's Python wrappers, and
# `wasm_byte_vec_new` with untyped pointers so a text is copied from its `bytes` at a C address
# with no ctypes objects made (measured: a canned reCAPTCHA v2 solve with checkpoints, 260 -> 230 µs).
_byte_vec_new_at = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)(
    ctypes.cast(_bindings._wasm_byte_vec_new, ctypes.c_void_p).value)
_val_delete = _bindings._wasmtime_component_val_delete
_func_call = _bindings._wasmtime_component_func_call
_resource_clone = _bindings._wasmtime_component_resource_any_clone
_record_new_uninit = _bindings._wasmtime_component_valrecord_new_uninit
_record_delete = _bindings._wasmtime_component_valrecord_delete
_list_new = _bindings._wasmtime_component_vallist_new
_list_new_empty = _bindings._wasmtime_component_vallist_new_empty
_KIND = _VAL.kind.offset
_val_new = _bindings._wasmtime_component_val_new
_addressof = ctypes.addressof
_memset = ctypes.memset
_ENTRY_NAME = _ENTRY.name.offset


def _new_text_at(address: int, text: str) -> None:
    """Fills the `wasm_name_t` at C ``address`` with a copy of ``text``."""
    data = text.encode("utf-8")
    _byte_vec_new_at(address, len(data), data)


def _new_text(vec: Any, text: str) -> None:
    """Fills the `wasm_name_t` ``vec`` (a view into a C value) with a copy of ``text``."""
    _new_text_at(_addressof(vec), text)


_RANGES = {"u8": (0, 0xFF), "u16": (0, 0xFFFF), "u32": (0, 0xFFFF_FFFF), "u64": (0, 0xFFFF_FFFF_FFFF_FFFF)}


def lowerer(ty: Any, where: str = "value") -> Lower:
    """A converter from a Python value to a C value of type ``ty``; ``where`` names it in errors."""
    if isinstance(ty, T.Bool):
        def lower_bool(x: Any, v: Any) -> None:
            if not isinstance(x, bool):
                raise TypeError(f"{where} must be a bool, not {type(x).__name__}")
            v.of.boolean = x
            v.kind = K_BOOL

        return lower_bool
    for cls, field, kind in ((T.U8, "u8", K_U8), (T.U16, "u16", K_U16), (T.U32, "u32", K_U32),
                             (T.U64, "u64", K_U64)):
        if isinstance(ty, cls):
            return _int_lowerer(field, kind, where)
    if isinstance(ty, T.F64):
        def lower_f64(x: Any, v: Any) -> None:
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise TypeError(f"{where} must be a number, not {type(x).__name__}")
            v.of.f64 = float(x)
            v.kind = K_F64

        return lower_f64
    if isinstance(ty, T.String):
        def lower_string(x: Any, v: Any) -> None:
            if not isinstance(x, str):
                raise TypeError(f"{where} must be a str, not {type(x).__name__}")
            _new_text(v.of.string, x)
            v.kind = K_STRING

        return lower_string
    if isinstance(ty, T.EnumType):
        names = set(ty.names)

        def lower_enum(x: Any, v: Any) -> None:
            if x not in names:
                raise ValueError(f"{where} must be one of {sorted(names)}, not {x!r}")
            _new_text(v.of.enumeration, x)
            v.kind = K_ENUM

        return lower_enum
    if isinstance(ty, T.RecordType):
        entries = [(i * _ENTRY_SIZE, name, lowerer(fty, f"{where}.{name}")) for i, (name, fty) in enumerate(ty.fields)]
        count = len(entries)
        total = count * _ENTRY_SIZE

        def lower_record(x: Any, v: Any) -> None:
            raw = ffi.wasmtime_component_valrecord_t()
            _record_new_uninit(byref(raw), count)
            base = _addressof(raw.data.contents)
            # All zero is every entry's value a `false` bool and its name empty: safe to delete.
            _memset(base, 0, total)
            try:
                for at, name, lower in entries:
                    _new_text_at(base + at + _ENTRY_NAME, name)
                    lower(x[name], _VAL.from_address(base + at + _ENTRY_VAL))
            except BaseException:
                _record_delete(byref(raw))
                raise
            v.of.record = raw
            v.kind = K_RECORD

        return lower_record
    if isinstance(ty, T.OptionType):
        inner = lowerer(ty.payload, where)

        def lower_option(x: Any, v: Any) -> None:
            if x is None:
                v.of.option = None
            else:
                tmp = _VAL()
                inner(x, tmp)
                v.of.option = _val_new(byref(tmp))
            v.kind = K_OPTION

        return lower_option
    if isinstance(ty, T.ResultType):
        ok = lowerer(ty.ok, where) if ty.ok is not None else None
        err = lowerer(ty.err, where) if ty.err is not None else None

        def lower_result(x: Any, v: Any) -> None:
            tag, payload = x
            if tag not in ("ok", "err"):
                raise ValueError(f"{where} must be ('ok', ...) or ('err', ...)")
            lower = ok if tag == "ok" else err
            ptr = None
            if lower is not None:
                tmp = _VAL()
                lower(payload, tmp)
                ptr = _val_new(byref(tmp))
            v.of.result.is_ok = tag == "ok"
            v.of.result.val = ptr
            v.kind = K_RESULT

        return lower_result
    if isinstance(ty, T.VariantType):
        cases = {name: (lowerer(cty, f"{where}.{name}") if cty is not None else None) for name, cty in ty.cases}

        def lower_variant(x: Any, v: Any) -> None:
            tag, payload = x
            if tag not in cases:
                raise ValueError(f"{where} must be one of the cases {sorted(cases)}, not {tag!r}")
            lower = cases[tag]
            ptr = None
            if lower is not None:
                tmp = _VAL()
                lower(payload, tmp)
                ptr = _val_new(byref(tmp))
            v.of.variant.discriminant = ffi.str_to_capi(tag)
            v.of.variant.val = ptr
            v.kind = K_VARIANT

        return lower_variant
    if isinstance(ty, T.ListType) and isinstance(ty.element, T.U8):
        def lower_bytes(x: Any, v: Any) -> None:
            if not isinstance(x, (bytes, bytearray)):
                raise TypeError(f"{where} must be bytes, not {type(x).__name__}")
            n = len(x)
            if n == 0:
                _list_new_empty(byref(v.of.list))
            else:
                # `n` u8 values laid out at once (each value's kind and its byte at the union), then
                # copied into the list by the C API: one pass over the bytes, no object per byte.
                raw = bytearray(n * _VAL_SIZE)
                raw[_KIND::_VAL_SIZE] = bytes([K_U8]) * n
                raw[_UNION::_VAL_SIZE] = x
                values = (_VAL * n).from_buffer(raw)
                _list_new(byref(v.of.list), n, values)
            v.kind = K_LIST

        return lower_bytes
    if isinstance(ty, T.BorrowType):
        def lower_borrow(x: Any, v: Any) -> None:
            if not isinstance(x, ResourceAny):
                raise TypeError(f"{where} must be a resource handle")
            v.of.resource = _resource_clone(x.ptr())
            v.kind = K_RESOURCE

        return lower_borrow
    raise TypeError(f"unsupported component parameter type {type(ty).__name__} for {where}")


def _int_lowerer(field: str, kind: int, where: str) -> Lower:
    low, high = _RANGES[field]

    def lower_int(x: Any, v: Any) -> None:
        if isinstance(x, bool) or not isinstance(x, int):
            raise TypeError(f"{where} must be an int, not {type(x).__name__}")
        if not low <= x <= high:
            raise ValueError(f"{where} must be from {low} to {high} (got {x})")
        setattr(v.of, field, x)
        v.kind = kind

    return lower_int


class Signature:
    """A component function's converters, read once from its type."""

    def __init__(self, name: str, func_type: Any) -> None:
        self.name = name
        self.lowers: List[Lower] = [lowerer(t, f"{name}({pname})") for pname, t in func_type.params]
        result = func_type.result
        self.lift: Optional[Lift] = lifter(result) if result is not None else None


def call(store: Any, func: Any, signature: Signature, args: Tuple[Any, ...]) -> Any:
    """Calls ``func`` (a ``wasmtime.component.Func``) with ``args``; a trap raises WasmtimeError."""
    count = len(args)
    if count != len(signature.lowers):
        raise TypeError(f"{signature.name} takes {len(signature.lowers)} arguments, got {count}")
    params = (_VAL * count)()
    lowered = 0
    try:
        for lower, arg in zip(signature.lowers, args):
            lower(arg, params[lowered])
            lowered += 1
        lift = signature.lift
        result = _VAL()
        error = _func_call(
            byref(func._func), store._context(), params, count,
            byref(result) if lift is not None else None, 1 if lift is not None else 0)
        if error:
            exc = WasmtimeError._from_ptr(error)
            maybe_raise_last_exn()
            raise exc
        if lift is None:
            return None
        try:
            return lift(_string_at(ctypes.addressof(result), _VAL_SIZE), 0, ctypes.addressof(result))
        finally:
            _val_delete(byref(result))
    finally:
        for i in range(lowered):
            _val_delete(byref(params[i]))
