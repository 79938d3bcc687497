"""Checks of a composed YAML node graph, before anything is constructed from it.

Composing keeps every mapping's keys (construction would keep only the last of two) and shares
the node an alias names (construction would share the object too, and every walk over the data
would still visit it once per alias). So here, in one pass each: duplicate keys, an alias inside
the value it names, nesting deeper than ``MAX_NESTING`` and aliases that repeat too much.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass

import yaml

from trialrun.base.jsonpath import dotted
from trialrun.base.nesting import MAX_NESTING
from trialrun.base.quoting import excerpt
from trialrun.errors import ConfigError

PathElement = str | int

_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"
# Python refuses to convert longer decimal text to an int (a guard against quadratic time).
INT_DIGITS = sys.get_int_max_str_digits() or 4300


def duplicate_keys(root: yaml.Node, file: str) -> Iterator[ConfigError]:
    """An error for each key written twice in one mapping, at its second line.

    Keys brought in by a merge key (``<<: *base``) may be overridden: only written keys count.
    """
    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:  # aliases may share (or even cycle through) nodes
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first_line: dict[tuple[str, str], int] = {}
            for key_node, value_node in node.value:
                stack.append(value_node)
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                    stack.append(key_node)
                    continue
                identity = (key_node.tag, key_node.value)
                line = key_node.start_mark.line + 1
                if identity in first_line:
                    yield ConfigError(
                        f"duplicate key '{excerpt(key_node.value)}' (first defined at line "
                        f"{first_line[identity]}; YAML would silently keep only the last one)",
                        file=file,
                        line=line,
                        key=key_node.value,
                    )
                else:
                    first_line[identity] = line
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


MAX_ALIAS_VALUES = 100_000
"""How many values aliases may repeat in one document (each mapping, list and scalar counts one,
at every depth). A real suite repeats a few hundred; nine nested lists of nine aliases each
repeat 43 million, and every walk over the data (validation, the agent's input, the artifacts)
would take minutes."""
MAX_ALIAS_CHARS = 10_000_000
"""How many characters of text aliases may repeat in one document: the agent receives them."""


@dataclass
class _Expansion:
    """What aliases have repeated so far, in document order."""

    values: int = 0
    chars: int = 0


def shape_problem(root: yaml.Node, file: str) -> ConfigError | None:
    """A value no walk over it survives: an alias inside the very mapping or list it names
    (``a: &x [1, *x]``), mappings and lists nested more than ``MAX_NESTING`` deep, or aliases
    that repeat more than ``MAX_ALIAS_VALUES`` values (an alias bomb).

    YAML can build all three. The first would contain itself (JSON cannot hold it) and every walk
    over it (validation, the agent's input, the artifacts) would never end; the second runs out
    of Python's stack in those walks; the third makes them take minutes. Each node of the graph
    is visited once: the size of what an alias repeats is known from its anchor, which YAML
    places before it. Reported at the line of the nearest key above (an alias node keeps no
    position of its own).
    """
    enclosing: set[int] = set()
    # (node, its path, the line of the nearest key) to enter; a bare node: leaving it
    stack: list[tuple[yaml.Node, tuple[PathElement, ...], int] | yaml.Node] = [
        (root, (), root.start_mark.line + 1)
    ]
    # Every node left so far: how many values and characters of text it holds, aliases expanded
    sizes: dict[int, tuple[int, int]] = {}
    repeated = _Expansion()
    while stack:
        item = stack.pop()
        if isinstance(item, yaml.Node):
            enclosing.discard(id(item))
            sizes[id(item)] = _expanded_size(item, sizes)
            continue
        node, path, line = item
        if id(node) in enclosing:
            where = dotted(path) or "the top level"
            return ConfigError(
                f"the alias at '{where}' names a value that contains it: the value would "
                "contain itself, which JSON cannot hold; write that part out instead",
                file=file,
                line=line,
            )
        size = sizes.get(id(node))
        if size is not None:  # an alias: YAML repeats the whole value it names here
            repeated.values += size[0]
            repeated.chars += size[1]
            if repeated.values > MAX_ALIAS_VALUES or repeated.chars > MAX_ALIAS_CHARS:
                return _alias_bomb(repeated, file, line)
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = (1, len(node.value))
            if node.tag == _INT_TAG and (digits := _decimal_digits(node.value)) > INT_DIGITS:
                return ConfigError(
                    f"an integer of about {digits:,} digits; trialrun reads integers of at most "
                    f"{INT_DIGITS:,} digits (quote it to keep it as text)",
                    file=file,
                    line=node.start_mark.line + 1,
                )
            continue
        if len(path) >= MAX_NESTING:
            where = dotted(path[:4]) + "..."
            return ConfigError(
                f"'{where}' nests mappings and lists more than {MAX_NESTING} levels deep; "
                f"trialrun reads at most {MAX_NESTING}",
                file=file,
                line=line,
            )
        enclosing.add(id(node))
        stack.append(node)
        # Children go on the stack last first, so that they are entered in document order and
        # every anchor is left before an alias names it.
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in reversed(node.value):
                key: PathElement = (
                    key_node.value if isinstance(key_node, yaml.ScalarNode) else "<key>"
                )
                key_line = key_node.start_mark.line + 1
                stack.append((value_node, (*path, key), key_line))
                stack.append((key_node, (*path, key), key_line))
        elif isinstance(node, yaml.SequenceNode):
            for index in range(len(node.value) - 1, -1, -1):
                stack.append((node.value[index], (*path, index), line))
    return None


def _expanded_size(node: yaml.Node, sizes: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """The values and characters ``node`` holds with its aliases expanded (children are left)."""
    children: list[yaml.Node] = (
        [part for pair in node.value for part in pair]
        if isinstance(node, yaml.MappingNode)
        else list(node.value)
    )
    values, chars = 1, 0
    for child in children:
        child_values, child_chars = sizes[id(child)]
        values += child_values
        chars += child_chars
    return values, chars


def _alias_bomb(repeated: _Expansion, file: str, line: int) -> ConfigError:
    if repeated.values > MAX_ALIAS_VALUES:
        what = f"more than {MAX_ALIAS_VALUES:,} values"
    else:
        what = f"more than {MAX_ALIAS_CHARS:,} characters of text"
    return ConfigError(
        f"aliases up to this line repeat {what}; trialrun expands at most {MAX_ALIAS_VALUES:,} "
        f"values and {MAX_ALIAS_CHARS:,} characters per file (an alias bomb?): write the "
        "repeated parts out or use fewer aliases",
        file=file,
        line=line,
    )


def _decimal_digits(value: str) -> int:
    """About how many decimal digits the int scalar ``value`` has once constructed.

    Decimal text longer than Python's limit cannot be converted, and an int with more digits
    than it, however it was written (``0x...``), cannot be printed or sent as JSON.
    """
    text = value.replace("_", "").lstrip("+-")
    for prefix, digits_per_char in (("0b", 0.302), ("0x", 1.205)):
        if text.startswith(prefix):
            return int((len(text) - 2) * digits_per_char)
    if text.startswith("0") and len(text) > 1:  # octal
        return int((len(text) - 1) * 0.904)
    return len(text)  # decimal, or sexagesimal (1:30), which grows no faster
