"""Kernels in a box: bubblewrap around any kernel, as a jupyter_client kernel provisioner.

`box.py` says what a box holds and builds its bubblewrap command; `provisioner.py` is the
provisioner jupyter_client loads for a kernelspec that names it (entry point
`jupyter-ci-sandbox`); `proxy.py` is the egress proxy of a box whose network is an
allowlist (`allowlist.py` says what passes, `egress.py` runs one per process, `forward.py`
is its port in the box).
"""
