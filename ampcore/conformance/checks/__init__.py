"""The conformance checks, one module per section of the report (``test_kernels.py`` -> "kernels")."""
