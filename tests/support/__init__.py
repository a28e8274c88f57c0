"""Plain helper modules shared by the tests (not test modules, not conftest: pytest collects none of them)."""
