"""YAML loading that remembers where everything came from.

PyYAML's ``safe_load`` throws away positions and silently keeps the last of two duplicate keys.
Here the document is composed into its node graph first, checked for duplicate keys, and only then
constructed into Python data; the node graph is kept so any error found later (by validation, by an
assertion compiler) can be reported at the line of the key or value it concerns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import yaml

from trialrun.base.fsutil import undecodable
from trialrun.base.nesting import MAX_NESTING, nests_deeper_than
from trialrun.base.quoting import excerpt, shortened
from trialrun.config.yamlgraph import INT_DIGITS, duplicate_keys, shape_problem
from trialrun.config.yamlgraph import MAX_ALIAS_CHARS as MAX_ALIAS_CHARS
from trialrun.config.yamlgraph import MAX_ALIAS_VALUES as MAX_ALIAS_VALUES
from trialrun.config.yamlgraph import PathElement as PathElement
from trialrun.errors import ConfigError, ConfigErrors

_START = yaml.Mark("", 0, 0, 0, None, 0)
# PyYAML's problems are fixed phrases plus, at times, a name or a tag from the file.
_PROBLEM_CHARS = 120
_LONG_NUMBER = re.compile(rf"\d{{{INT_DIGITS + 1},}}")

# libyaml is several times faster, but it refuses "\ud83d"-style escapes that the pure-Python
# parser decodes into lone surrogates (which case inputs may legitimately carry). On any libyaml
# error the pure-Python loader gets a second try: it either succeeds or gives the error text
# users know from PyYAML.
if TYPE_CHECKING:  # CSafeLoader exists at run time only when PyYAML was built with libyaml
    _LoaderClass: TypeAlias = type[yaml.SafeLoader] | type[yaml.CSafeLoader]
_FAST_LOADER: _LoaderClass | None = getattr(yaml, "CSafeLoader", None)


class _Lines:
    """The lines of a loaded document: where a path is, and errors placed there."""

    file: str
    """The file name as shown in error messages."""
    root: yaml.Node

    def line_of(self, path: Sequence[PathElement]) -> int:
        """1-based line of the key (or list item) at ``path``.

        When the path does not exist, the line of its nearest existing ancestor; the empty path is
        the document's first line. Never raises.
        """
        return _line_of(self.root, path)

    def error(
        self, message: str, path: Sequence[PathElement] = (), key: str | None = None
    ) -> ConfigError:
        """A ConfigError in this file at the line of ``path``."""
        return _error_at(message, self.file, self.line_of(path), key)


@dataclass(frozen=True)
class LoadedYaml(_Lines):
    """A YAML mapping document and the node graph it was built from."""

    data: dict[str, Any]
    file: str
    root: yaml.MappingNode


_MESSAGE_CHARS = 600
"""The longest message reported at a line: beyond it, something quoted the file at length."""


def _error_at(message: str, file: str, line: int, key: str | None) -> ConfigError:
    # Readers quote what they found through ``excerpt``; this bounds whatever slipped past.
    return ConfigError(shortened(message, _MESSAGE_CHARS), file=file, line=line, key=key)


def load_yaml_file(path: Path, *, display: str | None = None) -> LoadedYaml:
    """Read and parse a YAML file whose top level must be a mapping (a ``.json`` file: JSON).

    Raises ConfigError (unreadable file, not UTF-8, syntax error, not a mapping) or ConfigErrors
    (every duplicate key).
    """
    shown = display if display is not None else str(path)
    text = _read_text(path, shown)
    if path.suffix == ".json":
        return parse_json(text, file=shown)
    return parse_yaml(text, file=shown)


@dataclass(frozen=True)
class LoadedValue(_Lines):
    """A YAML (or JSON) document of any top-level type and the node graph it was built from."""

    data: Any
    file: str
    root: yaml.Node


def load_yaml_value(path: Path, *, expected: str, display: str | None = None) -> LoadedValue:
    """As ``load_yaml_file``, for a file whose top level may be a list or a scalar too.

    ``expected`` says what the file should hold ("a list of rules"), for an empty file.

    Raises ConfigError (unreadable file, not UTF-8, syntax error, empty) or ConfigErrors (every
    duplicate key).
    """
    shown = display if display is not None else str(path)
    text = _read_text(path, shown)
    if path.suffix == ".json":
        data, node = _json_and_nodes(text, shown, f"expected {expected}")
        return LoadedValue(data=data, file=shown, root=node)
    found, data = _compose_and_construct(text, shown)
    if found is None:  # about the file as a whole: no line (a comment-only file is empty too)
        raise ConfigError(f"the file is empty; expected {expected}", file=shown)
    return LoadedValue(data=data, file=shown, root=found)


def parse_yaml_value(text: str, *, file: str) -> Any:
    """The data of YAML text of any top-level type (None when it holds nothing), read with the
    same checks as a file: duplicate keys, self-containing aliases, nesting, alias repeats.

    For YAML embedded in another file (a SKILL.md frontmatter): errors name lines of ``text``.
    """
    return _compose_and_construct(text, file)[1]


def _read_text(path: Path, shown: str) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror or exc}", file=shown) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where, line = undecodable(raw, exc)
        raise ConfigError(f"file is not valid UTF-8: {where}", file=shown, line=line) from None


def parse_json(text: str, *, file: str) -> LoadedYaml:
    """Parse JSON text whose top level must be an object, with the lines of its keys.

    JSON is nearly YAML, but YAML 1.1 reads ``1e5`` as a string and forbids tabs between tokens:
    the values come from the JSON parser, the node graph for line numbers (and the duplicate-key
    check) from the YAML parser.
    """
    data, node = _json_and_nodes(text, file, "expected an object of keys to values")
    if not isinstance(data, dict):
        found = "a list" if isinstance(data, list) else f"the value {excerpt(json.dumps(data))}"
        raise ConfigError(
            f"expected an object of keys to values at the top level, found {found}",
            file=file,
            line=1,
        )
    if not isinstance(node, yaml.MappingNode):
        node = yaml.MappingNode("tag:yaml.org,2002:map", [], _START, _START)
    return LoadedYaml(data=data, file=file, root=node)


def _json_and_nodes(text: str, file: str, expected: str) -> tuple[Any, yaml.Node]:
    """The JSON value of ``text`` and the YAML node graph of the same text (for its lines)."""
    if not text.strip():  # about the file as a whole, as for YAML
        raise ConfigError(f"the file is empty; {expected}", file=file)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", file=file, line=exc.lineno
        ) from None
    except RecursionError:
        raise _too_deep(text, file) from None
    except ValueError:  # Python's refusal names no place, and advises on Python
        raise ConfigError(
            f"invalid JSON: a number of more than {INT_DIGITS:,} digits; trialrun reads "
            f"integers of at most {INT_DIGITS:,} digits (quote it to keep it as text)",
            file=file,
            line=_first_line_matching(text, _LONG_NUMBER),
        ) from None
    if nests_deeper_than(data, text=text):
        raise _too_deep(text, file)
    # Outside strings valid JSON holds tabs only as whitespace, where a space means the same.
    try:
        node, _ = _compose_and_construct(text.replace("\t", " "), file)
    except ConfigErrors:
        raise
    except ConfigError:
        node = None  # valid JSON the YAML parser still refuses: no line numbers, same data
    if node is None:
        node = yaml.ScalarNode("tag:yaml.org,2002:null", "", _START, _START)
    return data, node


def parse_yaml(text: str, *, file: str) -> LoadedYaml:
    """Parse YAML text whose top level must be a mapping (see ``load_yaml_file``)."""
    node, data = _compose_and_construct(text, file)
    if node is None:
        # About the file as a whole: no line (a comment-only file is empty too).
        raise ConfigError("the file is empty; expected a mapping of keys to values", file=file)
    if not isinstance(node, yaml.MappingNode) or not isinstance(data, dict):
        raise ConfigError(
            f"expected a mapping of keys to values at the top level, found {_node_kind(node)}",
            file=file,
            line=node.start_mark.line + 1,
        )
    return LoadedYaml(data=data, file=file, root=node)


def _compose_and_construct(text: str, file: str) -> tuple[yaml.Node | None, Any]:
    if _FAST_LOADER is not None:
        try:
            return _load_with(_FAST_LOADER, text, file)
        except yaml.YAMLError:
            pass
    try:
        return _load_with(yaml.SafeLoader, text, file)
    except RecursionError:  # PyYAML's own composer recurses once per level
        raise _too_deep(text, file) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        # The problem can quote the file (an undefined alias's name, a tag): never at length.
        problem = excerpt(exc.problem or exc.context or "syntax error", _PROBLEM_CHARS)
        line = mark.line + 1 if mark is not None else 1
        raise ConfigError(f"invalid YAML: {problem}", file=file, line=line) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, max(exc.position, 0)) + 1
        what = (
            f"unacceptable character #x{exc.character:04x}: "
            if isinstance(exc.character, int)
            else ""
        )
        raise ConfigError(f"invalid YAML: {what}{exc.reason}", file=file, line=line) from None
    except yaml.YAMLError as exc:
        # Its text can hold a snippet of the file: a short, redacted excerpt at most.
        problem = excerpt(str(exc), _PROBLEM_CHARS)
        raise ConfigError(f"invalid YAML: {problem}", file=file, line=1) from None


def _load_with(loader_class: _LoaderClass, text: str, file: str) -> tuple[yaml.Node | None, Any]:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        # Before construction: constructing flattens merge keys into the mappings.
        duplicates = list(duplicate_keys(node, file))
        if duplicates:
            raise ConfigErrors(duplicates)
        problem = shape_problem(node, file)
        if problem is not None:
            raise problem
        return node, _construct(loader, node, file)
    finally:
        loader.dispose()


class _Unconstructible(Exception):
    """A scalar PyYAML's constructor crashed on, carried out of the recursion."""

    def __init__(self, node: yaml.Node, cause: Exception) -> None:
        super().__init__()
        self.node = node
        self.cause = cause


def _construct(loader: yaml.SafeLoader | yaml.CSafeLoader, node: yaml.Node, file: str) -> Any:
    """The document's data; a value its tag's constructor cannot make is a ConfigError.

    PyYAML's constructors raise plain Python errors for text their tag's pattern accepts but the
    value cannot hold (``2024-13-45``, ``!!int abc``, ``!!bool maybe``), naming no line. Each
    node's construction is wrapped, once per loader, so the innermost failing node is named.
    """
    construct_object = loader.construct_object

    def located(child: yaml.Node, deep: bool = False) -> Any:
        try:
            return construct_object(child, deep)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise _Unconstructible(child, exc) from None

    loader.construct_object = located  # type: ignore[method-assign,assignment]
    try:
        return loader.construct_document(node)
    except _Unconstructible as failed:
        bad = failed.node
        kind = str(bad.tag).rsplit(":", 1)[-1]
        shown = excerpt(bad.value) if isinstance(bad.value, str) else kind
        reason = (
            f": {excerpt(str(failed.cause), 80)}" if isinstance(failed.cause, ValueError) else ""
        )
        raise ConfigError(
            f"cannot read {shown!r} as {kind}{reason}",
            file=file,
            line=bad.start_mark.line + 1,
        ) from None


def _too_deep(text: str, file: str) -> ConfigError:
    """Text nested too deeply to read or walk, at the line where it gets too deep."""
    return ConfigError(
        f"mappings and lists nest more than {MAX_NESTING} levels deep; trialrun reads at most "
        f"{MAX_NESTING}",
        file=file,
        line=_first_line_deeper_than(text, MAX_NESTING),
    )


def _first_line_matching(text: str, pattern: re.Pattern[str]) -> int:
    found = pattern.search(text)
    return text.count("\n", 0, found.start()) + 1 if found else 1


def _first_line_deeper_than(text: str, limit: int) -> int:
    """The line where flow brackets (``[`` / ``{``) first open more than ``limit`` deep: text
    nested that deeply is brackets, an indented block of a thousand levels is unheard of."""
    depth = 0
    line = 1
    for char in text:
        if char == "\n":
            line += 1
        elif char in "[{":
            depth += 1
            if depth > limit:
                return line
        elif char in "]}":
            depth -= 1
    return 1


def _line_of(root: yaml.Node, path: Sequence[PathElement]) -> int:
    node = root
    line = node.start_mark.line + 1
    for element in path:
        found = _child(node, element)
        if found is None:
            break
        line, node = found
    return line


def _child(node: yaml.Node, element: PathElement) -> tuple[int, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        wanted = str(element)
        # The last match wins, as in the constructed data (a key can repeat via merge keys).
        found: tuple[int, yaml.Node] | None = None
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == wanted:
                found = (key_node.start_mark.line + 1, value_node)
        return found
    if (
        isinstance(node, yaml.SequenceNode)
        and isinstance(element, int)
        and 0 <= element < len(node.value)
    ):
        item: yaml.Node = node.value[element]
        return item.start_mark.line + 1, item
    return None


def _node_kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if isinstance(node, yaml.ScalarNode):
        return f"the scalar {excerpt(node.value)!r}" if node.value else "an empty value"
    return "a mapping"
