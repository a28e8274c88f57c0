"""Calibration from measured runs: `hp-plan calibrate` (docs/formats.md §6, §8; docs/calibration.md)."""
