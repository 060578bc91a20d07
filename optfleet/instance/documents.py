"""Read a YAML or JSON file into a mapping, refusing with one clear message anything that is not a sane document.

Every refusal is an :class:`~optfleet.errors.InputError` naming the field (or option) that gave the path:

* a missing path, a directory, or a file larger than :data:`MAX_DOCUMENT_BYTES`;
* text that is not UTF-8 (a UTF-8 or UTF-16 byte-order mark is honoured), or binary data;
* an empty document (nothing but blanks or comments);
* malformed YAML or JSON, with the line and column;
* a key given twice in one mapping (YAML and JSON would silently keep the last one), named by its path;
* nesting deeper than :data:`MAX_DEPTH`, or YAML aliases that expand to more than :data:`MAX_EXPANDED_VALUES`
  values (an "alias bomb": a few lines that unfold into billions of values), named by the field where it sits;
* a top level that is not a mapping of fields.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

import yaml

from optfleet.errors import InputError
from optfleet.instance.data_files import BINARY_DATA, require_file

MAX_DOCUMENT_BYTES = 64 * 2**20  # instance and plan files are small; larger data goes in trace or table files
MAX_DEPTH = 64  # nesting levels; the deepest instance schema needs 6
MAX_EXPANDED_VALUES = 1_000_000  # values a document may unfold into through YAML aliases


def read_document(path: Path, field: str = "instance") -> dict[str, Any]:
    """Parse a YAML or JSON file (JSON by the ``.json`` suffix) into a mapping; see the module docstring."""
    text = read_text(path, field)
    is_json = path.suffix.lower() == ".json"
    if not _has_content(text, is_json):
        raise InputError(field, str(path), "the file is empty")
    try:
        data = parse_json(text) if is_json else parse_yaml(text, "")
    except RecursionError:
        raise InputError(field, str(path), f"nested more than {MAX_DEPTH} levels deep") from None
    except DuplicateKeyError as exc:
        raise InputError(exc.path, exc.key, "duplicate key: given twice in one object; JSON would keep only the last") from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise InputError(field, str(path), f"malformed {'JSON' if is_json else 'YAML'}: {_where(exc)}") from None
    if _depth(data) > MAX_DEPTH:
        raise InputError(field, str(path), f"nested more than {MAX_DEPTH} levels deep")
    if not isinstance(data, dict):
        raise InputError(field, str(path), f"the top level must be a mapping of fields, not a {type(data).__name__}")
    return data


def read_text(path: Path, field: str, max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """The text of ``path`` (UTF-8, or UTF-16 with its byte-order mark), or an InputError naming ``field``."""
    require_file(path, field)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise InputError(field, str(path), f"the file has {size:,} bytes, more than the {max_bytes:,} a document may have")
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(field, str(path), f"cannot be read: {exc.strerror or exc}") from None
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"  # a UTF-8 byte-order mark is dropped, not read as part of the first key
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise InputError(field, str(path), f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save it as UTF-8") from None
    if "\x00" in text:
        raise InputError(field, str(path), BINARY_DATA)
    return text


class DuplicateKeyError(ValueError):
    """A JSON object with a key given twice (raised by :func:`parse_json`; ``path`` is the key's dotted path)."""

    def __init__(self, path: str, key: str) -> None:
        super().__init__(path)
        self.path, self.key = path, key


def parse_yaml(text: str, field: str) -> Any:
    """YAML text parsed safely: a key given twice in one mapping, or aliases that unfold into more than
    :data:`MAX_EXPANDED_VALUES` values, are refused naming the field path where they sit (under ``field`` for a
    value given on its own, e.g. by ``--set``)."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is None:
        return None
    _check_nodes(node, field, {})
    return yaml.safe_load(text)


def _check_nodes(node: yaml.Node, path: str, sizes: dict[int, int]) -> None:
    """Refuse duplicate keys and alias bombs below ``node`` (at dotted ``path``), walking each node once."""
    if _expanded_size(node, sizes) <= MAX_EXPANDED_VALUES:
        return _check_duplicates(node, path, set())
    while True:  # down to the deepest mapping key whose value is too large: that is the field to name
        children = list(node.value) if isinstance(node, yaml.MappingNode) else []
        big = next(((k, v) for k, v in children if _expanded_size(v, sizes) > MAX_EXPANDED_VALUES), None)
        if big is None:
            raise InputError(path, "<a YAML alias>", f"its aliases unfold into {_expanded_size(node, sizes):,} values, "
                                                     f"more than the {MAX_EXPANDED_VALUES:,} allowed")
        node, path = big[1], _join(path, big[0].value)


def _check_duplicates(node: yaml.Node, path: str, seen_nodes: set[int]) -> None:
    if id(node) in seen_nodes:  # an alias to a node already checked
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: set[Any] = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key in keys:
                mark = key_node.start_mark
                raise InputError(_join(path, key), key, f"duplicate key: given twice in one mapping (line {mark.line + 1}, "
                                                        f"column {mark.column + 1}); YAML would keep only the last")
            keys.add(key)
            _check_duplicates(value_node, _join(path, key) if key is not None else path, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_duplicates(item, _join(path, str(i)), seen_nodes)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many values ``node`` unfolds into, each alias counted in full (memoised per node: linear time)."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a node reached again while it is being counted (a recursive alias) counts once
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    else:
        size = 1
    memo[key] = min(size, 10 * MAX_EXPANDED_VALUES)  # saturate: the sum of huge counts stays a small integer
    return memo[key]


def parse_json(text: str) -> Any:
    """JSON text parsed with every object checked for a key given twice (:class:`DuplicateKeyError` names its path:
    JSON itself would silently keep the last value)."""
    return _json_objects(json.loads(text, object_pairs_hook=_Pairs), "")


class _Pairs(list):
    """A JSON object as parsed: its (key, value) pairs in order, duplicates kept until checked."""


def _json_objects(value: Any, path: str) -> Any:
    if isinstance(value, _Pairs):
        result: dict[str, Any] = {}
        for key, item in value:
            if key in result:
                raise DuplicateKeyError(_join(path, key), key)
            result[key] = _json_objects(item, _join(path, key))
        return result
    if isinstance(value, list):
        return [_json_objects(item, _join(path, str(i))) for i, item in enumerate(value)]
    return value


def _has_content(text: str, is_json: bool) -> bool:
    """Whether ``text`` holds anything but blanks (and, in YAML, comments and document markers)."""
    if is_json:
        return bool(text.strip())
    return any(line.strip() and not line.lstrip().startswith("#") and line.strip() not in ("---", "...") for line in text.splitlines())


def _depth(value: Any, level: int = 0) -> int:
    """Nesting depth of parsed data (stops counting past MAX_DEPTH)."""
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _where(exc: Exception) -> str:
    """Where and what: ``line 3, column 7: ...`` for YAML and JSON errors."""
    if isinstance(exc, json.JSONDecodeError):
        return f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return problem
