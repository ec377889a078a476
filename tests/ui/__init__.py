"""Browser tests: JupyterLab with the jupyter-ci extension, driven by Playwright."""
