"""``sfenv.experiments.derive_nccl_wan``: Sailor's NCCL send/recv profile cut to pairs of zones in two regions."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from sfenv.experiments.derive_nccl_wan import COLUMNS, main, rates, rates_csv

from sfenv.errors import InvalidInput

BUNDLED = Path(__file__).resolve().parents[1] / "sfenv" / "data" / "measured" / "nccl_sendrecv_gcp_sailor.csv"


def _entry(peak: float) -> list:
    return [[-0.01, 0.1, 1.0], peak]


def _profile() -> dict:
    """Two zones of r1, one of r2; A100 VMs of 1 and 2 GPUs; one V100 row towards an A100 (not kept)."""
    return {
        "r1-a": {"A100": {
            "1": {"r1-a": {"A100": {"1": _entry(2.5e9)}}, "r1-b": {"A100": {"1": _entry(2.4e9)}},
                  "r2-b": {"A100": {"1": _entry(0.625e9)}}},
            "2": {"r2-b": {"A100": {"2": _entry(0.9e9), "1": _entry(0.5e9)}, "V100": {"2": _entry(1e9)}}}}},
        "r2-b": {"A100": {"1": {"r1-a": {"A100": {"1": _entry(0.6e9)}}}},
                 "V100": {"1": {"r1-a": {"A100": {"1": _entry(0.7e9)}}}}},
    }


def _write(tmp_path: Path, profile: object) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    return path


def test_keeps_pairs_of_two_regions_with_the_same_gpus_in_gbit_per_s(tmp_path):
    rows = rates(_write(tmp_path, _profile()))
    assert [tuple(r[c] for c in COLUMNS) for r in rows] == [
        ("r1-a", "r2-b", "A100", "1", "5.000"), ("r2-b", "r1-a", "A100", "1", "4.800"),
        ("r1-a", "r2-b", "A100", "2", "7.200")]
    assert rates_csv(rows).splitlines()[0] == ",".join(COLUMNS)


@pytest.mark.parametrize(("profile", "message"), [
    ([], "the top level: expected a JSON object"),
    ({"r1-a": {"A100": {"1": {"r2-b": {"A100": {"1": [[0.1], -3]}}}}}}, "is not a positive number"),
    ({"r1-a": {"A100": {"1": {"r2-b": {"A100": {"1": [[0.1], True]}}}}}}, "is not a positive number"),
    ({"r1-a": {"A100": {"1": {"r2-b": {"A100": {"1": 5}}}}}}, "expected [[fit coefficients], largest bytes/s]"),
    ({"r1-a": {"A100": {"x": {"r2-b": {"A100": {"x": _entry(1e9)}}}}}}, "is not a positive integer"),
    ({"r1-a": {"A100": "fast"}}, "r1-a -> A100: expected a JSON object, got str"),
])
def test_a_profile_of_another_layout_is_refused_naming_the_entry(tmp_path, profile, message):
    with pytest.raises(InvalidInput, match="profile.json") as e:
        rates(_write(tmp_path, profile))
    assert message in str(e.value)


def test_not_json_names_the_line(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text('{\n"a": }')
    with pytest.raises(InvalidInput, match=r"profile.json: not a JSON network profile \(Expecting value: line 2"):
        rates(path)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": ' + "9" * 100_000 + "}"])
def test_deep_nesting_and_huge_integers_are_one_line(tmp_path, text):
    path = tmp_path / "profile.json"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=r"profile.json: not a JSON network profile \((nested too|an integer)"):
        rates(path)


def test_the_command_line_writes_once_and_refuses_to_replace_unasked(tmp_path):
    src, out = _write(tmp_path, _profile()), tmp_path / "rates.csv"
    with contextlib.redirect_stdout(io.StringIO()):
        main(["--profile", str(src), "--out", str(out)])
    assert out.read_text() == rates_csv(rates(src))
    out.write_text("mine\n")
    with pytest.raises(InvalidInput, match="exists; pass --force"):
        main(["--profile", str(src), "--out", str(out)])
    assert out.read_text() == "mine\n"
    with pytest.raises(InvalidInput, match="no pair of zones in two different regions"):
        main(["--profile", str(_write(tmp_path, {"r1-a": {}})), "--out", str(tmp_path / "none.csv")])
    assert not (tmp_path / "none.csv").exists()


def test_the_bundled_rates_are_in_this_layout():
    """48 directed pairs between us-central1's four zones and us-west1-b, 1, 2 and 4 GPUs of A100-40 and V100-16."""
    lines = BUNDLED.read_text().splitlines()
    assert lines[0] == ",".join(COLUMNS) and len(lines) == 49
    rows = [dict(zip(COLUMNS, line.split(","))) for line in lines[1:]]
    assert {(r["gpu"], r["pairs"]) for r in rows} == {(g, n) for g in ("A100-40", "V100-16") for n in "124"}
    assert all({r["src_zone"].rsplit("-", 1)[0], r["dst_zone"].rsplit("-", 1)[0]} == {"us-central1", "us-west1"}
               for r in rows)
