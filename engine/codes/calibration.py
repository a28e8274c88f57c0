"""HP8xx: calibration from measured runs (hp-plan calibrate, RUNS files, ratios files; docs/formats.md §6, §8)."""

ROWS: list[tuple[str, str, str]] = [
    ("HP800", "error", "the RUNS file is not a list of measured runs"),
    ("HP801", "error", "a run's config or log cannot be read"),
    ("HP802", "error", "a log with no step lines in a known format"),
    ("HP803", "error", "a measured value (a log line, a profile's step) is not one a run can give"),
    ("HP804", "error", "a log's steps disagree too much to read one step time"),
    ("HP805", "error", "a run's config does not state one strategy that prices"),
    ("HP806", "error", "a run states no measurement"),
    ("HP807", "warning", "a fitted ratio is far from 1 or at its bound"),
    ("HP808", "error", "runs from different frameworks or device types"),
    ("HP809", "warning", "the ratios file was fitted on another framework or device type"),
    ("HP810", "error", "the ratios file cannot be applied"),
    ("HP811", "warning", "a run's config is priced on something it does not state (a device assumed, a warning)"),
    ("HP812", "warning", "runs of one plan measured far apart, or one log or profile read for two runs"),
    ("HP813", "warning", "a run gives a figure and a log: the figure is measured"),
    ("HP820", "error", "a profiler trace or profile cannot be read"),
    ("HP821", "error", "a profile with no complete step"),
    ("HP822", "error", "a profile of another run than its config states"),
]

# code -> the modules that raise it (tests/engine/test_code_owners.py scans the emitters and keeps this true).
RAISED_BY: dict[str, tuple[str, ...]] = {
    "HP800": ("engine.calibrate.result", "engine.calibrate.runs"),
    "HP801": (
        "engine.calibrate.ascend",
        "engine.calibrate.logs",
        "engine.calibrate.runs",
        "engine.calibrate.stream",
        "engine.calibrate.profiler_trace",
    ),
    "HP802": ("engine.calibrate.logs",),
    "HP803": ("engine.calibrate.logs", "engine.calibrate.runs"),
    "HP804": ("engine.calibrate.logs",),
    "HP805": ("engine.calibrate.runs",),
    "HP806": ("engine.calibrate.runs",),
    "HP807": ("engine.calibrate.fit", "engine.calibrate.result"),
    "HP808": ("engine.calibrate.result",),
    "HP809": ("engine.ratios.attach",),
    "HP810": ("engine.ratios.attach", "engine.ratios.ratiofile"),
    "HP811": ("engine.calibrate.runs",),
    "HP812": ("engine.calibrate.result",),
    "HP813": ("engine.calibrate.runs",),
    "HP820": ("engine.calibrate.ascend", "engine.calibrate.stream", "engine.calibrate.profiler_trace"),
    "HP821": ("engine.calibrate.ascend", "engine.calibrate.profiler_trace"),
    "HP822": ("engine.calibrate.runs",),
}
