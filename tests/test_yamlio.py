"""The two YAML readers: the catalog's files by libyaml, users' files by the Python reader; the same data."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import gpuopt_here
from optimizer import catalog, yamlio
from optimizer.errors import InputError
from optimizer.yamlio import parse_yaml, read_text, read_yaml

needs_libyaml = pytest.mark.skipif(yamlio._CatalogLoader is None, reason="PyYAML built without libyaml")
SHIPPED = sorted(catalog.CATALOG_DIR.rglob("*.yaml"))
ROOT = Path(__file__).resolve().parent.parent


def test_the_catalog_has_yaml_files():
    names = {p.name for p in SHIPPED}
    assert {"models.yaml", "aws.yaml", "owned.yaml"} <= names


@needs_libyaml
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_file_reads_the_same_both_ways(path):
    by_c = yaml.load(read_text(path), Loader=yamlio._CatalogLoader)  # noqa: S506 - safe loader subclass
    by_python = parse_yaml(read_text(path), str(path))
    assert by_c == by_python
    assert read_yaml(path) == by_python


@needs_libyaml
def test_catalog_files_skip_the_python_reader_and_users_files_do_not(tmp_path, monkeypatch):
    def python_reader(text, file):
        raise AssertionError(f"the Python reader read {file}")

    monkeypatch.setattr(yamlio, "parse_yaml", python_reader)
    assert read_yaml(catalog.CATALOG_DIR / "offerings" / "aws.yaml")
    user = tmp_path / "mine.yaml"
    user.write_text((catalog.CATALOG_DIR / "offerings" / "aws.yaml").read_text())
    with pytest.raises(AssertionError, match="mine.yaml"):
        read_yaml(user)


@needs_libyaml
@pytest.mark.parametrize("text,message", [
    ("a: &x [1, 2]\nb: *x\n", "aliases (*name) are not allowed"),  # the alias check runs on libyaml's events
    ("a: [1, 2\nb: 3\n", "line 2, column 2"),  # where the Python reader reports the unclosed bracket
    ("a:\n  b: 1\n c: 2\n", "line 3, column 2"),
])
def test_a_catalog_file_libyaml_refuses_gets_the_python_readers_message(tmp_path, monkeypatch, text, message):
    monkeypatch.setattr(catalog, "CATALOG_DIR", tmp_path)
    path = tmp_path / "offerings.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as in_catalog:
        read_yaml(path)
    with pytest.raises(InputError) as by_python:
        parse_yaml(text, str(path))
    assert message in str(in_catalog.value)
    assert str(in_catalog.value) == str(by_python.value)


def test_a_tab_inside_a_plain_value_is_still_refused_in_a_users_file(tmp_path):
    # libyaml reads this as "fast\tlane"; users' files keep the Python reader's contract
    path = tmp_path / "p.yaml"
    path.write_text("name: fast\tlane\n")
    with pytest.raises(InputError, match="line 1"):
        read_yaml(path)


@pytest.mark.parametrize("text,line_col,what", [
    ("hours: !!float lots\n", "line 1, column 8", "'lots' is not a valid float"),
    ("a: 1\nmonth: !!int x\n", "line 2, column 8", "'x' is not a valid int"),
    ("spot: !!bool perhaps\n", "line 1, column 7", "'perhaps' is not a valid bool"),
    ("date: !!timestamp soon\n", "line 1, column 7", "'soon' is not a valid timestamp"),
])
def test_a_value_its_tag_cannot_hold_is_an_input_error_at_its_line(tmp_path, monkeypatch, text, line_col, what):
    with pytest.raises(InputError) as e:
        parse_yaml(text, "p.yaml")
    assert line_col in str(e.value) and what in str(e.value)
    if yamlio._CatalogLoader is not None:  # the catalog's reader refuses it too (and the message is the same)
        monkeypatch.setattr(catalog, "CATALOG_DIR", tmp_path)
        (tmp_path / "c.yaml").write_text(text)
        with pytest.raises(InputError, match=what):
            read_yaml(tmp_path / "c.yaml")


def test_a_tagged_value_that_fits_reads_as_before():
    assert parse_yaml("a: !!float 1.5\nb: !!int 7\nc: !!bool yes\nd: 1e9\n", "p.yaml") == {
        "a": 1.5, "b": 7, "c": True, "d": 1e9}


def test_validate_exits_2_on_a_bad_tagged_value(tmp_path):
    text = (ROOT / "problems" / "q3.yaml").read_text().replace("hours: 60,", "hours: !!float many,", 1)
    assert "!!float many" in text
    path = tmp_path / "q3.yaml"
    path.write_text(text)
    r = gpuopt_here("validate", path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "'many' is not a valid float" in r.stdout + r.stderr
