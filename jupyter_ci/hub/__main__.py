"""`python -m jupyter_ci.hub`: the jupyter-ci JupyterHub service, as the Hub starts it."""

from jupyter_ci.hub.app import main

main()
