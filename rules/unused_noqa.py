"""## What it does

Finds suppression comments naming jaxlint rules that suppress nothing: `# noqa: JL003` or
`# jaxlint: ignore[tree-at-batch]` on a line where no finding of that rule is reported
(ruff's RUF100). A code whose rule did not run on the file (not selected, or turned off by
`per-file-ignores`) is reported as non-enabled. Bare `# noqa`, `# jaxlint: ignore` and codes
of other tools (`# noqa: E501`) are left alone: jaxlint cannot tell whether another tool
needs them.

It is off by default (a `JL9xx` rule): turn it on with `--extend-select unused-noqa`.

## Why is this bad?

A suppression outlives the code it was written for: after a refactor it silences nothing,
and later hides a real finding on that line. Removing it keeps the suppressions honest.

## Example

```python
for batch in loader:
    loss = step(params, batch)  # noqa: JL005
```

Use instead:

```python
for batch in loader:
    loss = step(params, batch)
```

## Fix safety

The fix takes the unused codes out of the comment at the end of the line, and the whole
`noqa` directive when none is left (other text of the comment stays). It is **safe** when
every code removed is of a rule that ran on the file: it silenced nothing. It is **unsafe**
when a code is non-enabled: a run that enables that rule may need it. A suppression in a
comment on a line of its own gets no fix. The fix is plain text: `runtime-helpers` in
`[tool.jaxlint]` changes nothing here.
"""

from __future__ import annotations

from jaxlint._rule import Applicability, Rule


class UnusedNoqa(Rule):
    """Reported by the engine after suppression, which is when it knows what each comment
    silenced; the rule itself visits nothing."""

    CODE = "JL901"
    SLUG = "unused-noqa"
    MESSAGE = "Unused `noqa` directive"
    FIX = Applicability.SAFE
    DEFAULT_ON = False
