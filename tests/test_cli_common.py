"""Tests of what the sub-commands share (skcce/cli/_common.py): exit statuses, one-line errors,
integer parsers and the output check."""

import argparse

import pytest

from skcce.cli import _common
from skcce.cli._common import CommandError, check_output, one_line, run_command


def _raise(exc):
    def action():
        raise exc

    return action


@pytest.mark.parametrize(
    "action, status, said",
    [
        (lambda: None, 0, ""),
        (_raise(CommandError("no images\nfound")), 1, "skcce x: error: no images found\n"),
        (_raise(ValueError("bad   value")), 1, "skcce x: error: bad value\n"),
        (_raise(OSError()), 1, "skcce x: error: OSError\n"),
        (_raise(KeyboardInterrupt()), 130, "skcce x: interrupted\n"),
    ],
)
def test_run_command_maps_errors_to_exit_statuses(capsys, action, status, said):
    assert run_command("skcce x", action) == status
    assert capsys.readouterr().err == said


def test_run_command_lets_unexpected_errors_through():
    with pytest.raises(ZeroDivisionError):
        run_command("skcce x", lambda: 1 / 0)


@pytest.mark.parametrize(
    "parse, good, bad", [(_common.positive_int, "1", "0"), (_common.non_negative_int, "0", "-1")]
)
def test_integer_parsers(parse, good, bad):
    assert parse(good) == int(good)
    for text in (bad, "two", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match=repr(text)):
            parse(text)


def test_one_line_folds_and_cuts():
    assert one_line(" a\n b\t c ") == "a b c"
    assert one_line("x" * 20, limit=10) == "xxxxxxx..."


def test_check_output(tmp_path):
    check_output("-")
    check_output(str(tmp_path / "labels.csv"))
    with pytest.raises(CommandError, match="is a folder"):
        check_output(str(tmp_path))
    with pytest.raises(CommandError, match="does not exist"):
        check_output(str(tmp_path / "missing" / "labels.csv"))
