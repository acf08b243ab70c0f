"""Build pydantic models from values we made ourselves, already of their fields' types, without validation.

``Model.model_construct`` does the same, but per call it walks every field (aliases, defaults, the default
factories' signatures): on a model of twenty fields that costs several times what building the values did,
and the evaluation pipeline builds a Trace and a result per evaluated span. :func:`trusted` does that walk once
per model class and per call only copies a template, so its instances equal ``model_construct``'s (same
``__dict__`` in field order, same fields set); models whose construction runs code (``model_post_init``,
private attributes, ``extra="allow"``, root models) go through ``model_construct``.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from types import GetSetDescriptorType, MemberDescriptorType
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
_FILL: Any = object()  # a template slot filled per call (required field, default factory, mutable default)


class _Plan:
    __slots__ = ("fill", "fill_names", "template")

    def __init__(self, template: dict[str, Any], fill: tuple[tuple[str, Callable[[], Any] | None], ...]) -> None:
        self.template = template
        self.fill = fill  # (field, maker): maker None for a required field (the caller must give it)
        self.fill_names = frozenset(name for name, _ in fill)


_PLANS: dict[type[BaseModel], _Plan | None] = {}
_UNPLANNED: Any = object()  # a class not looked at yet (None in _PLANS: one model_construct must build)


# --- Storing a built model's instance dict and pydantic's three slots ------------------------------------------
#
# ``object.__setattr__(model, name, value)`` on these four names finds the data descriptor ``name`` resolves to on
# ``type(model)`` (BaseModel's ``__dict__`` getset and its three member slots) and calls its ``__set__``: on Python
# 3.11 the call goes through the wrapper descriptor's type check, an argument tuple and the generic attribute lookup
# (~1k instructions each, four per model built, once per evaluated span's result). Calling each descriptor's own
# ``__set__`` stores the same value in the same place without that path. Which descriptors a class resolves to is
# looked up once per class, as ``object.__setattr__`` does (the first class in its MRO defining the name); a class
# whose ``__new__`` is not ``object.__new__`` or whose names resolve to anything else keeps the old calls.
_STORED = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
_SETTERS: dict[type, tuple[Callable[[Any, Any], None], ...]] = {}  # () for a class that keeps object.__setattr__
_new: Any = object.__new__


def _setters(cls: type) -> tuple[Callable[[Any, Any], None], ...]:
    """The ``__set__`` of the descriptors ``object.__setattr__`` stores ``_STORED`` through on ``cls`` (cached)."""
    setters: tuple[Callable[[Any, Any], None], ...] = ()
    try:
        if cls.__new__ is _new:
            found = []
            for name in _STORED:
                descriptor = next((klass.__dict__[name] for klass in cls.__mro__ if name in klass.__dict__), None)
                if type(descriptor) is not GetSetDescriptorType and type(descriptor) is not MemberDescriptorType:
                    break
                found.append(descriptor.__set__)
            else:
                setters = tuple(found)
    except Exception:  # an odd class: the generic calls, as before
        setters = ()
    _SETTERS[cls] = setters
    return setters


def _stored(model: M, data: dict[str, Any], fields_set: set[str]) -> M:
    """``model`` (just made by ``cls.__new__``) with its instance dict ``data``, ``fields_set`` and no extra/private."""
    object.__setattr__(model, "__dict__", data)
    object.__setattr__(model, "__pydantic_fields_set__", fields_set)
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


def _plan(cls: type[BaseModel]) -> _Plan | None:
    """How to build ``cls``; None when only ``model_construct`` can (it runs code or renames fields)."""
    config = cls.model_config
    if (
        cls.__pydantic_post_init__
        or cls.__private_attributes__
        or config.get("extra") == "allow"
        or cls.__pydantic_root_model__
    ):
        return None
    template: dict[str, Any] = {}
    fill: list[tuple[str, Callable[[], Any] | None]] = []
    for name, field in cls.__pydantic_fields__.items():
        if field.alias not in (None, name) or field.validation_alias not in (None, name):
            return None
        template[name] = _FILL
        if field.is_required():
            fill.append((name, None))
        elif field.default_factory is not None:
            if getattr(field, "default_factory_takes_validated_data", False):
                return None
            fill.append((name, field.default_factory))  # type: ignore[arg-type]
        elif isinstance(field.default, list | dict | set) or not _immutable(field.default):
            fill.append((name, functools.partial(copy.deepcopy, field.default)))
        else:
            template[name] = field.default
    return _Plan(template, tuple(fill))


def _plan_of(cls: type[BaseModel]) -> _Plan | None:
    try:
        return _PLANS[cls]
    except KeyError:
        plan = _PLANS[cls] = _plan(cls)
        return plan


def _immutable(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str | bytes | tuple | frozenset)


def trusted(cls: type[M], fields_set: set[str] | None = None, /, **values: Any) -> M:
    """Return ``cls.model_construct(fields_set, **values)``, built at a fraction of its cost.

    Args:
        cls: The model class.
        fields_set: The fields reported as set (``model_fields_set``); default: the names in ``values``.
        **values: Field values, each of its field's type already (nothing is checked).
    """
    plan = _PLANS.get(cls, _UNPLANNED)  # not _plan_of(): one Python call less per model built
    if plan is _UNPLANNED:
        plan = _plan_of(cls)
    if plan is None:
        return cls.model_construct(fields_set, **values)
    data = plan.template.copy()
    data.update(values)
    # Callers usually give every slot to fill (one set operation in C then, no Python loop over the fields).
    for name, make in () if plan.fill_names <= values.keys() else plan.fill:
        if data[name] is _FILL:
            if make is None:
                raise TypeError(f"{cls.__name__}: required field {name!r} not given")
            data[name] = make()
    if len(data) != len(plan.template):  # an unknown name: model_construct ignores it (extra="ignore")
        data = {name: data[name] for name in plan.template}
    return from_template(cls, data, set(values) if fields_set is None else fields_set)


def trusted_copy(model: M, update: dict[str, Any]) -> M:
    """Return ``model.model_copy(update=update)`` (a shallow copy, ``update`` unvalidated), at a fraction of its cost.

    Args:
        model: The model to copy.
        update: Field values to replace, each of its field's type already; they are added to the fields set.
    """
    plan = _PLANS.get(type(model), _UNPLANNED)
    if plan is _UNPLANNED:
        plan = _plan_of(type(model))
    if plan is None or model.__pydantic_extra__ is not None or model.__pydantic_private__ is not None:
        return model.model_copy(update=update)
    data = model.__dict__.copy()
    data.update(update)
    return from_template(type(model), data, model.__pydantic_fields_set__ | update.keys())


def template(cls: type[BaseModel], per_call: frozenset[str]) -> dict[str, Any]:
    """Every field of ``cls`` in field order with its default, for :func:`from_template` (built once per caller).

    The fields in ``per_call`` hold a placeholder: the caller gives each of them a value on every build.

    Raises:
        TypeError: ``cls`` runs code when built, or a field that needs its own value per instance (required, a
            default factory, a mutable default) is not in ``per_call``: a template would share it.
    """
    plan = _plan_of(cls)
    if plan is None:
        raise TypeError(f"{cls.__name__} runs code when it is built: it has no template")
    shared = plan.fill_names - per_call
    if shared:
        raise TypeError(f"{cls.__name__}: fields {sorted(shared)} need a value per instance")
    return {name: _FILL if name in per_call else value for name, value in plan.template.items()}


def from_template(cls: type[M], data: dict[str, Any], fields_set: set[str]) -> M:
    """Return ``cls.model_construct(fields_set, **data)`` for ``data`` holding every field, in field order.

    ``data`` is a copy of :func:`template` with every ``per_call`` field given (or a model's ``__dict__``, updated).
    Nothing is checked. One model build with no Python loop and no keyword packing: what a cheap evaluator's result
    costs per span. :func:`trusted` and :func:`trusted_copy` build their models here too (one frame, as before).

    ``data`` becomes the model's instance dict and ``fields_set`` its fields set, both as handed in (not copied).
    They are stored through the descriptors ``object.__setattr__`` would use, looked up on the first build of
    ``cls`` and cached per class for the process's life: a class whose ``__new__`` or slot descriptors are changed
    after its first build keeps the lookup made then.
    """
    setters = _SETTERS.get(cls)  # looked up once per class (_setters)
    if setters is None:
        setters = _setters(cls)
    if not setters:
        return _stored(cls.__new__(cls), data, fields_set)
    set_dict, set_fields, set_extra, set_private = setters
    model: M = _new(cls)
    set_dict(model, data)
    set_fields(model, fields_set)
    set_extra(model, None)
    set_private(model, None)
    return model
