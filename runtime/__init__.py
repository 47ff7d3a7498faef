"""Runtime helpers that jaxlint's fixes rewrite code to, and checks that run on hardware.

Needs jax, jaxlib and equinox (jaxlint's `runtime` extra). The helpers land with the
issues that introduce them; importing this package never imports jax by itself.
"""

from ._batching import bucket as bucket, pad_to as pad_to, padded_batches as padded_batches
from ._benchmark import (
    BenchmarkResult as BenchmarkResult,
    BenchmarkWarning as BenchmarkWarning,
    ComparisonResult as ComparisonResult,
    benchmark as benchmark,
    compare as compare,
)
from ._compile import (
    CompileCounter as CompileCounter,
    assert_max_compiles as assert_max_compiles,
    count_compiles as count_compiles,
)
from ._extraction import jit_extraction as jit_extraction
from ._filter_jit import FilterJit as FilterJit, filter_jit as filter_jit
from ._host_sync import (
    HostSync as HostSync,
    HostSyncCounter as HostSyncCounter,
    HostSyncError as HostSyncError,
    count_host_syncs as count_host_syncs,
    no_host_sync as no_host_sync,
)
from ._later import OneStepLate as OneStepLate, one_step_late as one_step_late
from ._profile import RunProfile as RunProfile, profile as profile
from ._run_report import RunFinding as RunFinding, RunReport as RunReport
from ._sharding import make_mesh as make_mesh, shard_module as shard_module
from ._transfer import (
    prefetch_to_device as prefetch_to_device,
    prefetch_to_host as prefetch_to_host,
    to_host as to_host,
)
from ._tree_surgery import (
    UnmatchedPatternWarning as UnmatchedPatternWarning,
    apply_transforms as apply_transforms,
    iter_modules as iter_modules,
    tree_at_batched as tree_at_batched,
)


__all__: list[str] = [
    "bucket",
    "pad_to",
    "padded_batches",
    "BenchmarkResult",
    "BenchmarkWarning",
    "ComparisonResult",
    "benchmark",
    "compare",
    "CompileCounter",
    "assert_max_compiles",
    "count_compiles",
    "jit_extraction",
    "FilterJit",
    "filter_jit",
    "HostSync",
    "HostSyncCounter",
    "HostSyncError",
    "count_host_syncs",
    "no_host_sync",
    "OneStepLate",
    "one_step_late",
    "RunFinding",
    "RunProfile",
    "RunReport",
    "profile",
    "make_mesh",
    "shard_module",
    "prefetch_to_device",
    "prefetch_to_host",
    "to_host",
    "UnmatchedPatternWarning",
    "apply_transforms",
    "iter_modules",
    "tree_at_batched",
]
