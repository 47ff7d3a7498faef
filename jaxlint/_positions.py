"""Line and column of reported nodes, computed only around the statements that hold them.

libcst's `PositionProvider` regenerates the whole file with position tracking (more than the
parse itself on a large file). A finding needs positions for a few nodes only: the engine
counts the lines of the top-level statements before each reported one (plain codegen) and
tracks positions inside that statement alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState


__all__ = ["line_of", "positions"]


class _Positions:
    """The minimal provider interface `PositionProvidingCodegenState` writes into."""

    def __init__(self) -> None:
        self._computed: dict[cst.CSTNode, CodeRange] = {}


def _line_count(module: cst.Module, node: cst.CSTNode) -> int:
    code = module.code_for_node(node)
    return code.count("\n") + code.count("\r") - code.count("\r\n")


class _ModuleLines:
    """What positions of one module have cost so far, kept for the next question: the first
    line of each top-level statement up to the furthest one asked about, and the positions
    inside each statement already generated. Each statement is generated at most twice per
    module (once to count its lines, once with positions), however many findings ask."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.index = {id(statement): i for i, statement in enumerate(module.body)}
        self.starts: list[int] = []
        self.next_line = 1 + sum(_line_count(module, empty) for empty in module.header)
        self.done: dict[int, dict[cst.CSTNode, CodeRange]] = {}

    def start(self, index: int) -> int:
        body = self.module.body
        while len(self.starts) <= index:
            self.starts.append(self.next_line)
            self.next_line += _line_count(self.module, body[len(self.starts) - 1])
        return self.starts[index]

    def positions(self, statement: cst.CSTNode) -> dict[cst.CSTNode, CodeRange]:
        computed = self.done.get(id(statement))
        if computed is None:
            provider = _Positions()
            state = PositionProvidingCodegenState(
                default_indent=self.module.default_indent,
                default_newline=self.module.default_newline,
                provider=provider,  # type: ignore[arg-type]
            )
            state.line = self.start(self.index[id(statement)])
            statement._codegen(state)
            computed = self.done[id(statement)] = provider._computed
        return computed


# The module asked about last: rules ask about one file many times, then move to the next.
_last: _ModuleLines | None = None


def _lines_of(module: cst.Module) -> _ModuleLines:
    global _last
    if _last is None or _last.module is not module:
        _last = _ModuleLines(module)
    return _last


def positions(
    module: cst.Module, targets: Iterable[tuple[cst.CSTNode, cst.CSTNode | None]]
) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of every node in the top-level statements of `targets` (pairs of a node
    and the top-level statement containing it, or None when that is unknown)."""
    targets = list(targets)
    if any(statement is None for _, statement in targets):
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    lines = _lines_of(module)
    wanted = {id(statement): statement for _, statement in targets if statement is not None}
    if any(key not in lines.index for key in wanted):
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found: dict[cst.CSTNode, CodeRange] = {}
    for statement in sorted(wanted.values(), key=lambda s: lines.index[id(s)]):
        found.update(lines.positions(statement))
    return found


def line_of(module: cst.Module, node: cst.CSTNode, path: Sequence[cst.CSTNode]) -> int | None:
    """The first line of `node`, whose ancestors (from `module`) are `path`: positions of the
    top-level statement around it only, so it costs one statement's walk."""
    statement = path[1] if len(path) > 1 and path[0] is module else node if list(path) == [module] else None
    if statement is None:
        return None
    found = positions(module, [(node, statement)]).get(node)
    return found.start.line if found is not None else None
