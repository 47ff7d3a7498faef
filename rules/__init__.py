"""jaxlint's rules, one module per rule; each module's docstring is the rule's documentation."""

from __future__ import annotations

from jaxlint._rule import Rule

from .filter_jit_per_call import FilterJitPerCall as FilterJitPerCall
from .jit_in_loop import JitInLoop as JitInLoop
from .missing_jit import MissingJit as MissingJit
from .growing_shape_loop import GrowingShapeLoop as GrowingShapeLoop
from .host_copy_in_loop import HostCopyInLoop as HostCopyInLoop
from .pad_final_batch import PadFinalBatch as PadFinalBatch
from .tree_at_batch import TreeAtBatch as TreeAtBatch
from .unsynced_timing import UnsyncedTiming as UnsyncedTiming
from .unused_noqa import UnusedNoqa as UnusedNoqa


ALL_RULES: tuple[type[Rule], ...] = (TreeAtBatch, UnsyncedTiming)
ALL_RULES += (MissingJit, JitInLoop)
ALL_RULES += (FilterJitPerCall,)
ALL_RULES += (PadFinalBatch, HostCopyInLoop, GrowingShapeLoop)
ALL_RULES += (UnusedNoqa,)

__all__ = ["ALL_RULES", "TreeAtBatch", "UnsyncedTiming"]
__all__ += ["JitInLoop", "MissingJit"]
__all__ += ["FilterJitPerCall"]
__all__ += ["GrowingShapeLoop", "HostCopyInLoop", "PadFinalBatch"]
__all__ += ["UnusedNoqa"]
