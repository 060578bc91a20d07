"""The instance-file reference, generated from each kind's pydantic schema: every field by its dotted path, with
its type, default, bounds and meaning.

The schemas are the one source of truth; the documentation renders :func:`kind_reference` for every registered
kind, and a test checks that every field path of every schema (:func:`field_paths`) appears in it.  A field's
meaning is the comment on its line or the string under it in the schema's source; the section of each nested
block carries its class docstring (where the schemas explain how fields work together).

Paths: ``a.b`` for a nested block, ``a[]`` for the items of a list, ``a{}`` for the values of a mapping, and
``constraints[] (kind: fixed)`` for one member of a list of tagged blocks.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Iterator
from functools import cache
from typing import Any

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


@dataclasses.dataclass(frozen=True)
class FieldRow:
    """One field of one block: its name, type in words, default, bounds and meaning."""

    name: str
    type_text: str
    default: str
    bounds: str
    meaning: str


@dataclasses.dataclass(frozen=True)
class Block:
    """One block of an instance file: its path, its schema class and its fields."""

    path: str
    schema: type[BaseModel]
    rows: tuple[FieldRow, ...]


def blocks(schema: type[BaseModel], path: str = "") -> Iterator[Block]:
    """Every block of ``schema`` (itself first, then each nested block), depth first, each schema class once per path."""
    rows = []
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, info in schema.model_fields.items():
        rows.append(FieldRow(name, _type_text(info.annotation), _default_text(info), _bounds_text(info), _meaning(schema, name)))
        for suffix, model in _models_in(info.annotation):
            nested.append((f"{path}{'.' if path else ''}{name}{suffix}", model))
    yield Block(path, schema, tuple(rows))
    for sub_path, model in nested:
        yield from blocks(model, sub_path)


def field_paths(schema: type[BaseModel]) -> list[str]:
    """Every field's dotted path (module docstring), e.g. ``hardware.iteration.chunk_tokens``."""
    return [f"{b.path}{'.' if b.path else ''}{row.name}" for b in blocks(schema) for row in b.rows]


def kind_reference(kind_name: str, schema: type[BaseModel]) -> str:
    """The Markdown reference of one kind: a section per block, with its docstring and a table of its fields."""
    lines = [f"# `kind: {kind_name}`", "", _doc(schema), ""]
    for block in blocks(schema):
        if block.path:
            lines += [f"## `{block.path}`", "", _doc(block.schema), ""]
        lines += ["| field | type | default | bounds | meaning |", "|---|---|---|---|---|"]
        for row in block.rows:
            path = f"{block.path}{'.' if block.path else ''}{row.name}"
            lines.append(f"| `{path}` | {_cell(row.type_text)} | {_cell(row.default)} | {_cell(row.bounds)} | {_cell(row.meaning)} |")
        lines.append("")
    return "\n".join(lines)


def _doc(schema: type[BaseModel]) -> str:
    """The class docstring, its Sphinx roles (``:class:`X```) written as code."""
    own = schema.__dict__.get("__doc__")
    return re.sub(r":\w+:`~?([^`]+)`", r"``\1``", inspect.cleandoc(own)) if own else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _strip(annotation: Any) -> Any:
    """``Annotated[X, ...]`` -> ``X``, recursively at the top."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _members(annotation: Any) -> tuple[Any, ...]:
    annotation = _strip(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(_strip(a) for a in typing.get_args(annotation) if a is not type(None))
    return (annotation,)


def _models_in(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """The schema classes a field holds, with the path suffix of each (``""``, ``[]``, ``{}``, ``[] (kind: x)``)."""
    found: list[tuple[str, type[BaseModel]]] = []
    members = _members(annotation)
    tagged = len([m for m in members if _is_model(m)]) > 1
    for member in members:
        origin = typing.get_origin(member)
        if _is_model(member):
            found.append((_tag(member) if tagged else "", member))
        elif origin in (list, tuple, set, frozenset):
            for suffix, model in _models_in(typing.get_args(member)[0]):
                found.append((f"[]{suffix}", model))
        elif origin is dict:
            for suffix, model in _models_in(typing.get_args(member)[1]):
                found.append((f"{{}}{suffix}", model))
    return found


def _fixed_value(annotation: Any) -> Any:
    """The one value of a ``Literal["x"]`` field (a block's tag), else None."""
    if typing.get_origin(annotation) is typing.Literal and len(typing.get_args(annotation)) == 1:
        return typing.get_args(annotation)[0]
    return None


def _tag_field(model: type[BaseModel]) -> tuple[str, Any] | None:
    """The block's first field with one fixed value (``kind``, ``policy``, ``source``...), and that value."""
    return next(((name, value) for name, info in model.model_fields.items() if (value := _fixed_value(info.annotation)) is not None), None)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _tag(model: type[BaseModel]) -> str:
    """`` (kind: fixed)`` for a member of a tagged union: its first field with one fixed value (``kind``,
    ``policy``, ``source``...); else the block's name in words."""
    tag = _tag_field(model)
    if tag is not None:
        return f" ({tag[0]}: {tag[1]})"
    return f" ({re.sub(r'(?<!^)(?=[A-Z])', ' ', model.__name__.removesuffix('Spec')).lower()})"


def _type_text(annotation: Any) -> str:
    members = _members(annotation)
    if len(members) > 1 and all(_is_model(m) for m in members):
        return "block, one of: " + ", ".join(_tag(m).strip(" ()") for m in members)
    optional = typing.get_origin(_strip(annotation)) in (typing.Union, types.UnionType) and type(None) in typing.get_args(_strip(annotation))
    text = " or ".join(_one_type(m) for m in members)
    return f"{text} (optional)" if optional else text


def _one_type(annotation: Any) -> str:
    annotation = _strip(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{v}`" for v in typing.get_args(annotation))
    if origin in (list, tuple, set, frozenset):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return f"list of {_type_text(args[0])}" if args else "list"
    if origin is dict:
        key, value = typing.get_args(annotation)
        return f"mapping {_type_text(key)} -> {_type_text(value)}"
    if origin in (typing.Union, types.UnionType):
        return _type_text(annotation)
    if _is_model(annotation):
        return f"block{_tag(annotation)}" if _tag_field(annotation) is not None else "block"
    if annotation is typing.Any:
        return "any"
    names = {bool: "boolean", int: "integer", float: "number", str: "text"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default_text(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    else:
        value = info.default
    if value is None or value is PydanticUndefined:
        return "none"
    if isinstance(value, BaseModel):
        given = {k: v for k, v in value.model_dump(exclude_defaults=False).items() if v is not None and k in value.model_fields_set}
        return f"`{_yaml(given)}`" if given else "its fields' defaults"
    return f"`{_yaml(value)}`"


def _yaml(value: Any) -> str:
    """A default as it is written in an instance file (``true``, ``""``, ``[1, 2]``, ``{formula: profile}``)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()
    return '""' if text == "''" else text


_BOUND_WORDS = {annotated_types.Gt: ">", annotated_types.Ge: ">=", annotated_types.Lt: "<", annotated_types.Le: "<=",
                annotated_types.MinLen: "at least {} items", annotated_types.MaxLen: "at most {} items"}


def _bounds_text(info: FieldInfo) -> str:
    """The field's bounds: its own (``Field(gt=...)``) and its type's (``Annotated[int, Field(ge=...)]``)."""
    parts = []
    for item in [*info.metadata, *_annotated_metadata(info.annotation)]:
        for kind, word in _BOUND_WORDS.items():
            if isinstance(item, kind):
                value = getattr(item, dataclasses.fields(item)[0].name)
                _add(parts, word.format(value) if "{}" in word else f"{word} {_number(value)}")
        limit = _at_most_limit(item)
        if limit is not None:
            _add(parts, f"<= {_number(limit)}")
    items = _item_bounds(info.annotation)
    if items:
        parts.append(items)
    return ", ".join(sorted(parts, key=lambda part: (not part.startswith(">"), part.startswith("each"))))


def _add(parts: list[str], text: str) -> None:
    if text not in parts:
        parts.append(text)


def _number(value: float) -> str:
    if value == 2**53:
        return "2^53"
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _annotated_metadata(annotation: Any) -> list[Any]:
    """The constraints an annotation carries: its own ``Annotated`` layers and those of each member of a union
    (``Annotated[float, Field(gt=0)] | None``)."""
    found = []
    pending = [annotation]
    while pending:
        member = pending.pop()
        while typing.get_origin(member) is typing.Annotated:
            args = typing.get_args(member)
            for extra in args[1:]:
                found.extend(getattr(extra, "metadata", [extra]))
            member = args[0]
        if typing.get_origin(member) in (typing.Union, types.UnionType):
            pending.extend(typing.get_args(member))
    return found


def _item_bounds(annotation: Any) -> str:
    """Bounds of the items of a list field (``list[Annotated[int, Field(gt=0)]]``): ``each > 0``."""
    for member in _members(annotation):
        if typing.get_origin(member) in (list, tuple, set, frozenset) and typing.get_args(member):
            item = FieldInfo.from_annotation(typing.get_args(member)[0])
            inner = _bounds_text(item)
            if inner:
                return f"each {inner}"
    return ""


def _at_most_limit(item: Any) -> float | None:
    """The limit of an :func:`optfleet.instance.shared_schema.at_most` validator (its closure's ``maximum``)."""
    func = getattr(item, "func", None)
    if func is None or getattr(func, "__name__", "") != "check" or func.__closure__ is None:
        return None
    values = dict(zip(func.__code__.co_freevars, (c.cell_contents for c in func.__closure__), strict=True))
    maximum = values.get("maximum")
    return maximum if isinstance(maximum, int | float) else None


@cache
def _field_notes(schema: type[BaseModel]) -> dict[str, str]:
    """``{field: meaning}`` from the schema's source: the comment on the field's line, or the string under it."""
    try:
        source = textwrap.dedent(inspect.getsource(schema))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    tree = ast.parse(source)
    notes: dict[str, str] = {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for i, node in enumerate(body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        after = body[i + 1] if i + 1 < len(body) else None
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            notes[node.target.id] = " ".join(after.value.value.split())
            continue
        line = lines[node.end_lineno - 1] if node.end_lineno else ""
        if "  # " in line:
            notes[node.target.id] = line.split("  # ", 1)[1].strip()
    return notes


def _meaning(schema: type[BaseModel], name: str) -> str:
    """The field's note in the source (:func:`_field_notes`), a tag's fixed value, else the bullet of its class
    docstring that starts with it (``* ``name``: ...``)."""
    for klass in schema.__mro__:
        if isinstance(klass, type) and issubclass(klass, BaseModel) and name in _field_notes(klass):
            return _field_notes(klass)[name]
    fixed = _fixed_value(schema.model_fields[name].annotation)
    if fixed is not None:
        return f"always `{fixed}`: names the block's kind"
    bullet = re.search(rf"^\s*[*-] ``{re.escape(name)}``[^:]*:\s*(.+?)(?=^\s*[*-] |\Z)", _doc(schema), flags=re.M | re.S)
    return " ".join(bullet.group(1).split()) if bullet else ""
