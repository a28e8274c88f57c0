"""Diagnostic code tables, one module per family; `engine.diagnostics.CODES` joins them.

Each module holds `ROWS: list[tuple[code, severity, title]]` with severity one of
"error" | "warning" | "information" | "hint".
"""
