"""Calls into a component function through wasmtime-py's public component API only.

The fallback of :mod:`._wit` (which reads wasmtime-py's private C bindings, and so is used only
with the wasmtime versions CI tests): ``Func.__call__`` with the values wasmtime-py documents
(``Record``, ``Variant``, ``ResourceAny``, plain Python scalars), converted to and from the very
shapes ``_wit`` gives, so the layers above cannot tell the two apart:

- record: ``dict`` keyed by the WIT field names (kebab-case);
- variant and result: ``(tag, payload)`` (payload ``None`` for a case without one);
- enum: the case name; option: ``None`` or the value; ``list<u8>``: ``bytes``;
- resource: ``wasmtime.component.ResourceAny`` (params are borrowed: the handle stays usable).

wasmtime-py returns a variant, option or result *untagged* (the bare payload) when its cases can
be told apart by Python type, and as a ``Variant(tag, payload)`` otherwise. Both forms are read
here; which one a parameter takes is worked out from the public type classes the same way. It is
slower than ``_wit`` (wasmtime-py reads the function type through FFI on every call) and gives
the same results: the golden vectors run on both paths.
"""

from __future__ import annotations

from typing import Any, Callable, FrozenSet, List, Optional, Tuple

from wasmtime.component import (
    F32,
    F64,
    S8,
    S16,
    S32,
    S64,
    U8,
    U16,
    U32,
    U64,
    Bool,
    BorrowType,
    Char,
    EnumType,
    FlagsType,
    ListType,
    OptionType,
    OwnType,
    Record,
    RecordType,
    ResourceAny,
    ResultType,
    String,
    TupleType,
    Variant,
    VariantType,
)

Lift = Callable[[Any], Any]
Lower = Callable[[Any], Any]
Cases = List[Tuple[str, Any]]

_NONE = object  # the class wasmtime-py counts for a case without a payload: anything


def _cases(ty: Any) -> Cases:
    if isinstance(ty, VariantType):
        return list(ty.cases)
    if isinstance(ty, OptionType):
        return [("none", None), ("some", ty.payload)]
    return [("ok", ty.ok), ("err", ty.err)]


def classes(ty: Any) -> FrozenSet[type]:
    """The Python classes wasmtime-py gives a value of type ``ty`` (its documented mapping)."""
    if isinstance(ty, Bool):
        return frozenset({bool})
    if isinstance(ty, (U8, U16, U32, U64, S8, S16, S32, S64)):
        return frozenset({int})
    if isinstance(ty, (F32, F64)):
        return frozenset({float})
    if isinstance(ty, (Char, String, EnumType)):
        return frozenset({str})
    if isinstance(ty, ListType):
        return frozenset({bytes if isinstance(ty.element, U8) else list})
    if isinstance(ty, RecordType):
        return frozenset({Record})
    if isinstance(ty, TupleType):
        return frozenset({tuple})
    if isinstance(ty, FlagsType):
        return frozenset({set})
    if isinstance(ty, (OwnType, BorrowType)):
        return frozenset({ResourceAny})
    if isinstance(ty, (VariantType, OptionType, ResultType)):
        if tagged(_cases(ty)):
            return frozenset({Variant})
        out: set = set()
        for _, case in _cases(ty):
            out |= {_NONE} if case is None else classes(case)
        return frozenset(out)
    raise TypeError(f"unsupported component type {type(ty).__name__}")


def tagged(cases: Cases) -> bool:
    """Whether wasmtime-py tags values of a variant-like type: when two cases share a class."""
    seen: set = set()
    for _, case in cases:
        mine = {_NONE} if case is None else classes(case)
        if mine & seen:
            return True
        seen |= mine
    return False


def _untagged_case(cases: List[Tuple[str, Optional[Lift], FrozenSet[type]]], value: Any) -> Tuple[str, Any]:
    for name, lift, kinds in cases:
        if lift is None:
            if value is None:
                return (name, None)
            continue
        if isinstance(value, tuple(kinds)):
            return (name, lift(value))
    raise TypeError(f"no case of this variant holds a {type(value).__name__}")


def lifter(ty: Any) -> Lift:
    """A converter from wasmtime-py's value of type ``ty`` to this package's fixed shape."""
    if isinstance(ty, RecordType):
        fields = [(name, lifter(fty)) for name, fty in ty.fields]
        return lambda v: {name: lift(getattr(v, name)) for name, lift in fields}
    if isinstance(ty, OptionType):
        inner = lifter(ty.payload)

        if tagged(_cases(ty)):  # an option of an option
            return lambda v: None if v.tag == "none" else inner(v.payload)
        return lambda v: None if v is None else inner(v)
    if isinstance(ty, (VariantType, ResultType)):
        cases = [(name, lifter(case) if case is not None else None,
                  classes(case) if case is not None else frozenset()) for name, case in _cases(ty)]
        by_tag = {name: lift for name, lift, _ in cases}
        if not tagged(_cases(ty)):
            return lambda v: _untagged_case(cases, v)

        def lift_tagged(v: Any) -> Tuple[str, Any]:
            lift = by_tag[v.tag]
            return (v.tag, None if lift is None else lift(v.payload))

        return lift_tagged
    if isinstance(ty, ListType):
        if isinstance(ty.element, U8):
            return bytes
        element = lifter(ty.element)
        return lambda v: [element(e) for e in v]
    if isinstance(ty, TupleType):
        elements = [lifter(e) for e in ty.elements]
        return lambda v: tuple(lift(e) for lift, e in zip(elements, v))
    return lambda v: v  # scalars, strings, enums (their case name), resources


_RANGES = {U8: (0, 0xFF), U16: (0, 0xFFFF), U32: (0, 0xFFFF_FFFF), U64: (0, 0xFFFF_FFFF_FFFF_FFFF)}


def lowerer(ty: Any, where: str = "value") -> Lower:
    """A converter from this package's fixed shape to wasmtime-py's value of type ``ty``, checking
    it as ``_wit`` does (``where`` names it in errors)."""
    if isinstance(ty, Bool):
        def lower_bool(x: Any) -> Any:
            if not isinstance(x, bool):
                raise TypeError(f"{where} must be a bool, not {type(x).__name__}")
            return x

        return lower_bool
    for cls, (low, high) in _RANGES.items():
        if isinstance(ty, cls):
            def lower_int(x: Any, low: int = low, high: int = high) -> Any:
                if isinstance(x, bool) or not isinstance(x, int):
                    raise TypeError(f"{where} must be an int, not {type(x).__name__}")
                if not low <= x <= high:
                    raise ValueError(f"{where} must be from {low} to {high} (got {x})")
                return x

            return lower_int
    if isinstance(ty, F64):
        def lower_f64(x: Any) -> Any:
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise TypeError(f"{where} must be a number, not {type(x).__name__}")
            return float(x)

        return lower_f64
    if isinstance(ty, String):
        def lower_string(x: Any) -> Any:
            if not isinstance(x, str):
                raise TypeError(f"{where} must be a str, not {type(x).__name__}")
            return x

        return lower_string
    if isinstance(ty, EnumType):
        names = set(ty.names)

        def lower_enum(x: Any) -> Any:
            if x not in names:
                raise ValueError(f"{where} must be one of {sorted(names)}, not {x!r}")
            return x

        return lower_enum
    if isinstance(ty, RecordType):
        fields = [(name, lowerer(fty, f"{where}.{name}")) for name, fty in ty.fields]

        def lower_record(x: Any) -> Any:
            record = Record()
            for name, lower in fields:
                setattr(record, name, lower(x[name]))
            return record

        return lower_record
    if isinstance(ty, OptionType):
        inner = lowerer(ty.payload, where)
        if tagged(_cases(ty)):
            return lambda x: Variant("none") if x is None else Variant("some", inner(x))
        return lambda x: None if x is None else inner(x)
    if isinstance(ty, (VariantType, ResultType)):
        cases = {name: (lowerer(case, f"{where}.{name}") if case is not None else None) for name, case in _cases(ty)}
        is_tagged = tagged(_cases(ty))

        def lower_variant(x: Any) -> Any:
            tag, payload = x
            if tag not in cases:
                raise ValueError(f"{where} must be one of the cases {sorted(cases)}, not {tag!r}")
            lower = cases[tag]
            value = None if lower is None else lower(payload)
            return Variant(tag, value) if is_tagged else value

        return lower_variant
    if isinstance(ty, ListType) and isinstance(ty.element, U8):
        def lower_bytes(x: Any) -> Any:
            if not isinstance(x, (bytes, bytearray)):
                raise TypeError(f"{where} must be bytes, not {type(x).__name__}")
            return bytes(x)

        return lower_bytes
    if isinstance(ty, BorrowType):
        def lower_borrow(x: Any) -> Any:
            if not isinstance(x, ResourceAny):
                raise TypeError(f"{where} must be a resource handle")
            return x

        return lower_borrow
    raise TypeError(f"unsupported component parameter type {type(ty).__name__} for {where}")


class Signature:
    """A component function's converters, read once from its (public) type."""

    def __init__(self, name: str, func_type: Any) -> None:
        self.name = name
        self.lowers: List[Lower] = [lowerer(t, f"{name}({pname})") for pname, t in func_type.params]
        result = func_type.result
        self.lift: Optional[Lift] = lifter(result) if result is not None else None


def call(store: Any, func: Any, signature: Signature, args: Tuple[Any, ...]) -> Any:
    """Calls ``func`` (a ``wasmtime.component.Func``) with ``args``; a trap raises WasmtimeError."""
    if len(args) != len(signature.lowers):
        raise TypeError(f"{signature.name} takes {len(signature.lowers)} arguments, got {len(args)}")
    result = func(store, *[lower(arg) for lower, arg in zip(signature.lowers, args)])
    return None if signature.lift is None else signature.lift(result)
