"""Runtime helpers that jaxlint's fixes rewrite code to, and checks that run on hardware.

Needs `pip install "jaxlint[runtime]"` (jax, jaxlib, equinox). The helpers land with the
issues that introduce them; importing this package never imports jax by itself.
"""

__all__: list[str] = []
