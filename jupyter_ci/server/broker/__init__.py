"""The key broker and model service: provider keys, kernels' credentials, budgets and turns."""
