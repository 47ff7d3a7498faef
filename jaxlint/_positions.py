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


def positions(
    module: cst.Module, targets: Iterable[tuple[cst.CSTNode, cst.CSTNode | None]]
) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of every node in the top-level statements of `targets` (pairs of a node
    and the top-level statement containing it, or None when that is unknown)."""
    targets = list(targets)
    wanted = {id(statement) for _, statement in targets if statement is not None}
    if any(statement is None for _, statement in targets) or not wanted:
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    provider = _Positions()
    line = 1 + sum(_line_count(module, empty) for empty in module.header)
    remaining = len(wanted)
    for statement in module.body:
        if id(statement) in wanted:
            state = PositionProvidingCodegenState(
                default_indent=module.default_indent,
                default_newline=module.default_newline,
                provider=provider,  # type: ignore[arg-type]
            )
            state.line = line
            statement._codegen(state)
            line = state.line
            remaining -= 1
            if remaining == 0:
                break
        else:
            line += _line_count(module, statement)
    return provider._computed


def line_of(module: cst.Module, node: cst.CSTNode, path: Sequence[cst.CSTNode]) -> int | None:
    """The first line of `node`, whose ancestors (from `module`) are `path`: positions of the
    top-level statement around it only, so it costs one statement's walk."""
    statement = path[1] if len(path) > 1 and path[0] is module else node if list(path) == [module] else None
    if statement is None:
        return None
    found = positions(module, [(node, statement)]).get(node)
    return found.start.line if found is not None else None
