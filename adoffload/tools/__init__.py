"""Command-line tools: ``python -m adoffload doctor | compile`` (``cli``, ``doctor``)."""
