"""Property: every numeric fact of a plan file and every numeric flag, at a hostile magnitude (0, negative,
2**64, 1e308, NaN, infinity, 400 digits, and the largest values priced), leaves check, estimate, search,
explain, compare and export bounded in time and memory, with a diagnostic or a usage error, never an internal
error. Each example runs `hp-plan` in a subprocess under a time and an address-space limit
(tests/support/cli.hp_plan_bounded); `--json` output is parsed strictly."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.catalog.models import MODEL_FIELDS
from engine.config.model_facts import BOOL_FIELDS, STR_FIELDS
from tests.support.cli import ROOT, hp_plan_bounded

PLAN = (ROOT / "examples" / "explain" / "1f1b.yaml").read_text()
MAGNITUDES = ("0", "-5", "18446744073709551616", "1.0e+308", ".nan", ".inf", "9" * 400, "16777216",
              "9007199254740993", "100000000000")
MODEL_FACTS = tuple(f for f in MODEL_FIELDS if f not in BOOL_FIELDS and f not in STR_FIELDS)
PLAN_FACTS = ("dp", "fsdp", "tp", "pp", "cp", "ep", "vpp", "micro_batch_size", "micro_batch_num",
              "global_batch_size", "memory_limit_gb", "num_nodes", "cards_per_node")
COMMANDS = (("check",), ("estimate",), ("search",), ("explain",), ("compare", "--best"),
            ("export", "--best", "--to", "megatron"))
FLAGS = (("--devices", "N"), ("--nodes", "N"), ("--cards-per-node", "N"), ("--memory-gb", "X"), ("--tokens", "X"),
         ("--top", "N"), ("--width", "N"))
FLAG_VALUES = ("0", "-5", "18446744073709551616", "1e308", "nan", "inf", "9" * 400, "1e-320")


def with_fact(key: str, value: str) -> str:
    """The plan with `key` set to `value`: replaced where the plan states it, else added to its model."""
    text, n = re.subn(rf"(?m)^(\s*){key}:.*$", lambda m: f"{m.group(1)}{key}: {value}", PLAN, count=1)
    return text if n else text.replace("model:\n", f"model:\n  {key}: {value}\n", 1)


def _strict(text: str) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def run_bounded(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        r = hp_plan_bounded(*args, timeout=45)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hp-plan {' '.join(a[:30] for a in args)} ran past 45 s")
    out = r.stdout + r.stderr
    assert r.returncode in (0, 1, 2), out[-2000:]
    for bad in ("HP900", "Traceback", "MemoryError"):
        assert bad not in out, out[-2000:]
    return r


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(MODEL_FACTS + PLAN_FACTS), value=st.sampled_from(MAGNITUDES),
       command=st.sampled_from(COMMANDS), as_json=st.booleans())
def test_a_hostile_fact_is_bounded_in_every_command(tmp_path: Path, key: str, value: str,
                                                    command: tuple[str, ...], as_json: bool) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(with_fact(key, value))
    json_flag = ("--json",) if as_json and command[0] != "export" else ()
    r = run_bounded(command[0], str(path), *command[1:], *json_flag)
    if json_flag:
        _strict(r.stdout)


@settings(max_examples=8, deadline=None)
@given(flag=st.sampled_from(FLAGS), value=st.sampled_from(FLAG_VALUES),
       command=st.sampled_from((("estimate",), ("search",), ("explain",))))
def test_a_hostile_flag_is_a_usage_error_or_bounded(flag: tuple[str, str], value: str,
                                                    command: tuple[str, ...]) -> None:
    if (flag[0] == "--top" and command[0] != "search") or (flag[0] == "--width" and command[0] != "explain"):
        command = ("search",) if flag[0] == "--top" else ("explain",)
    r = run_bounded(command[0], str(ROOT / "examples" / "explain" / "1f1b.yaml"), flag[0], value, "--json")
    doc = _strict(r.stdout)
    if r.returncode == 2:
        assert isinstance(doc, dict) and f"argument {flag[0]}" in str(doc["error"])
