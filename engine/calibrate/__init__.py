"""Calibration from measured runs: `hp-plan calibrate` (FORMATS.md §6, §8; docs/calibration.md)."""
