"""YAML is read as YAML 1.2 does (issue 10): `1e5` is a number, only true/false are booleans, `010` is ten; and
PyYAML's syntax errors are said in words: a tab, or the line whose indentation slipped."""
from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pytest
import yaml

from kentino_expert import yamlsrc
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.paths import bundled
from kentino_expert.ruleset.compiler import compile_ruleset
from kentino_expert.yamlsrc import YamlSourceError, load_yaml
from kentino_expert.yamlsyntax import slips

LOADERS = [name for name in ("CSafeLoader", "SafeLoader") if hasattr(yaml, name)]


@pytest.fixture(params=LOADERS)
def loader(request, monkeypatch):
    """Each PyYAML loader present (libyaml's and the pure-Python one) reads the same."""
    monkeypatch.setattr(yamlsrc, "_LOADER", getattr(yaml, request.param))


@pytest.mark.parametrize("text,value", [
    ("1e5", 100000.0), ("1E-3", 0.001), (".5", 0.5), ("5.", 5.0), ("+5", 5), ("-0.5e+2", -50.0), ("7", 7),
    ("010", 10), ("0o10", 8), ("0x1F", 31), ("true", True), ("True", True), ("FALSE", False), ("~", None),
    ("null", None), ("", None), ("yes", "yes"), ("no", "no"), ("on", "on"), ("off", "off"), ("y", "y"),
    ("1_000", "1_000"), ("1:30", "1:30"), ("0b101", "0b101"), ("2024-05-01", "2024-05-01"), ("'1e5'", "1e5"),
    ("'true'", "true"), ("1.0e9", 1e9)])
def test_plain_scalars_read_as_yaml_1_2(loader, text, value):
    """The core schema of YAML 1.2 decides what a plain scalar is; everything else is text."""
    read = load_yaml(f"x: {text}\n")["x"]
    assert read == value and type(read) is type(value)


@pytest.mark.parametrize("text,check", [(".inf", lambda v: v == math.inf), ("-.Inf", lambda v: v == -math.inf),
                                        (".NaN", math.isnan)])
def test_infinities_and_nan(loader, text, check):
    """.inf, -.inf and .nan are floats, as in both YAML versions (the rules refuse them where they harm)."""
    assert check(load_yaml(f"x: {text}\n")["x"])


def test_explicit_tags_still_convert(loader):
    """A tag says what a scalar is: `!!str 10` is text, `!!float 1` a float, `!!int 1_000` not a YAML 1.2 int."""
    assert load_yaml("a: !!str 10\nb: !!float 1\n") == {"a": "10", "b": 1.0}
    with pytest.raises(YamlSourceError, match="not a valid int: '1_000' is not a YAML 1.2 int"):
        load_yaml("a: !!int 1_000\n")


def test_a_parameter_written_1e5_is_the_number(tmp_path):
    """`value: 1e5` in parameters.yaml was text under YAML 1.1 (E003); it is 100,000 now."""
    rules = Path(shutil.copytree(bundled("rules"), tmp_path / "rules"))
    text = (rules / "parameters.yaml").read_text()
    assert "    value: 100000\n" in text
    (rules / "parameters.yaml").write_text(text.replace("    value: 100000\n", "    value: 1e5\n", 1))
    ruleset = compile_ruleset(rules, load_knowledge(bundled("knowledge")))
    assert ruleset.parameters["hyperscale_qps"].value == 100000.0


def test_the_bundled_files_read_as_before_but_their_numbers():
    """The bundled rule and knowledge files read as under YAML 1.1, but for numbers such as `1.0e9` that YAML 1.1
    read as text (an exponent without a sign): those are numbers now, of the same value."""
    for path in [*bundled("rules").glob("*.yaml"), *bundled("knowledge").glob("*.yaml")]:
        text = path.read_text(encoding="utf-8")
        now, before = yamlsrc.to_plain(load_yaml(text)), yaml.safe_load(text)
        assert _same_but_numbers(now, before), path.name


def _same_but_numbers(now, before) -> bool:
    """Equal, except where YAML 1.1 gave the text of the number YAML 1.2 gives."""
    if isinstance(now, dict) and isinstance(before, dict):
        return now.keys() == before.keys() and all(_same_but_numbers(now[k], before[k]) for k in now)
    if isinstance(now, list) and isinstance(before, list):
        return len(now) == len(before) and all(map(_same_but_numbers, now, before))
    if isinstance(now, (int, float)) and not isinstance(now, bool) and isinstance(before, str):
        return float(before) == now
    return now == before


def _slipped(lines: list[str]):
    """The file's text with one slip each, of every fourth line: indented one space more or less, a `- x` item
    below it when it is a key (at its keys' column and deeper), its value's closing quote left out."""
    for index, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#") or index % 4:  # the slips of every fourth line:
            continue  # they are alike, and the test stays quick
        yield "\n".join(lines[:index] + [" " + line] + lines[index + 1:])
        if line.startswith(" "):
            yield "\n".join(lines[:index] + [line[1:]] + lines[index + 1:])
        key = re.match(r"^( *)(- )?[a-z_]+:( .*)?$", line)
        if key:
            column = len(key.group(1)) + (2 if key.group(2) else 0)
            for extra in (column, column + 2):
                yield "\n".join(lines[:index + 1] + [" " * extra + "- x"] + lines[index + 1:])
        end = line.rstrip()
        if end.endswith(('"', "'")) and line.count(end[-1]) >= 2:
            yield "\n".join(lines[:index] + [end[:-1]] + lines[index + 1:])
        if end.endswith(("]", "}")):  # a bracket left open
            yield "\n".join(lines[:index] + [end[:-1]] + lines[index + 1:])
        plain = re.match(r"^( *(?:- )?[a-z_]+: )([A-Za-z][^:#'\"]* [^:#'\"]*)$", end)
        if plain:  # a ': ' inside a plain value
            yield "\n".join(lines[:index] + [plain.group(1) + plain.group(2).replace(" ", ": ", 1)] + lines[index + 1:])


class TestSyntaxInWords:
    """A tab or an indentation slip is named, at the line that slipped."""

    @pytest.mark.parametrize("text,where,words", [
        ("a:\n  b: 1\n\tc: 2\n", (3, 1), "a tab character: YAML indents with spaces"),
        ("a:\n  b: 1\n  \tc: 2\n", (3, 3), "a tab character"),
        ("a:\n  b: 1\n   c: 2\n  d: 3\n", (3, 4), "line 3 is indented 3 spaces, more than line 2 above it (2)"),
        ("a:\n   b: 1\n  c: 2\n  d: 3\n", (2, 4), "line 2 is indented 3 spaces, and the lines after it 2"),
        ("rules:\n  - id: x\n     when: y\n", (3, 6), "line 3 is indented 5 spaces, more than line 2")])
    def test_the_cause_is_named(self, loader, text, where, words):
        """The message says "tab" or "indentation" and points at the tab or the line that slipped."""
        with pytest.raises(YamlSourceError) as caught:
            load_yaml(text, "f.yaml")
        assert (caught.value.location.line, caught.value.location.column) == where
        assert words in caught.value.message, caught.value.message

    @pytest.mark.parametrize("text,where,words", [
        ("a:\n  b: 1\n  - x\n", (3, 3), "a list item among keys: line 3 starts with '- ' in the column of the keys "
         "of a mapping; the key above it, 'b' on line 2, has its value after its ':', so nothing can be listed under "
         "it. A list goes under a key with nothing after its ':'"),
        ("rules:\n  - id: x\n    when: a > 1\n    - b > 2\n", (4, 5), "the key above it, 'when' on line 3, has its "
         "value after its ':'"),
        ("a:\n  then:\n    - x\n    conclude: 1\n", (4, 5), "a key among list items: line 4 is not an item ('- ') "
         "but stands in the column of the list that starts on line 3; a list's lines all start with '- '"),
        ('a: "x\nb: 1\n', (1, 4), 'an unclosed quote: the value on line 1 opens with " and the file ends before it '
         "closes; close the quote on line 1"),
        ("a: 1\nb: 'x\n", (2, 4), "an unclosed quote: the value on line 2 opens with ' and the file ends"),
        ('a:\n  b: "x\n  c: "y"\n  d: 2\n', (2, 6), 'an unclosed quote: the value on line 2 opens with " and does '
         'not close it on its line, so the text runs on to the next ", on line 3; close the quote on line 2'),
        ("- id: x\n  because: 'it''s\n  when: 'y'\n", (2, 12), "an unclosed quote: the value on line 2 opens with '"),
        ("when:\n  - a > 1\n   - b > 2\n", (3, 4), "a list item that runs on: line 3 starts with '- ' indented deeper "
         "than the text on line 2 (column 5), so YAML reads it as the rest of that text ('a > 1 - b > 2')"),
        ("when:\n - a > 1\n  - b > 2\n", (3, 3), "a list item that runs on: line 3"),
        ("a: [1, 2\nb: 3\n", (1, 4), "an unclosed [: the [ on line 1 opens a list that no ] closes on its line"),
        ("- id: x\n  then: {a: 1\n  because: y\n", (2, 9), "an unclosed {: the { on line 2 opens a mapping"),
        ("a: [1, 2}\n", (1, 9), "a [ closed by }: the [ opens a list, which only ] closes"),
        ("a: {b: 1}}\n", (1, 10), "a } that closes nothing: line 1 has a } more than it opens"),
        ("a:\n  description: one node: eight GPUs\n", (2, 24), "a ': ' inside a value: line 2's value 'one node: "
         "eight GPUs' holds ': ', which YAML reads as the start of another key; put the whole value in quotes"),
        ("a: 'it's'\n", (1, 7), "a quote inside a quoted value: line 1's value opens with ', and the ' after 'it' "
         "closes it, so the text after it cannot follow; inside '...' write it twice ('')"),
        ('a: "say "hi" now"\n', (1, 9), 'a quote inside a quoted value: line 1\'s value opens with ", and the " after '
         "'say ' closes it")])
    def test_the_common_slips_are_said_in_words(self, loader, text, where, words):
        """Issue 30: a list item under a key, a key among items and an unclosed quote got PyYAML's own words ("did
        not find expected key", "found unexpected end of stream"), a line after the mistake."""
        with pytest.raises(YamlSourceError) as caught:
            load_yaml(text, "f.yaml")
        assert (caught.value.location.line, caught.value.location.column) == where, caught.value
        assert words in caught.value.message, caught.value.message

    def test_the_slips_of_the_bundled_files_are_all_said_in_words(self):
        """Lines of the bundled rule files (every fourth) indented one space more or less, a `- x` item added under
        their keys, the quote or bracket that closes their values removed, a ': ' put into a plain value: each is
        valid YAML or an error in words, never PyYAML's (the loader in use: the pure-Python one takes a minute, and
        the cases above hold both to it)."""
        raw = ("did not find", "expected", "found", "not allowed")
        for path in sorted(bundled("rules").glob("*.yaml")):
            lines = path.read_text(encoding="utf-8").split("\n")
            for text in _slipped(lines):
                try:
                    load_yaml(text, path.name)
                except YamlSourceError as exc:
                    assert not any(words in exc.message for words in raw), (path.name, exc.message)

    def test_other_syntax_errors_keep_pyyaml_words(self, loader):
        """An error that is none of the slips keeps PyYAML's words; a list that goes on over lines deeper than its
        key is no unclosed bracket."""
        with pytest.raises(YamlSourceError, match="found undefined alias"):
            load_yaml("a: &x 1\nb: *y\n", "f.yaml")
        with pytest.raises(YamlSourceError) as caught:
            load_yaml("a: [1,\n    2\n  b: 3]\n", "f.yaml")
        assert "unclosed" not in caught.value.message, caught.value.message
        assert load_yaml("a: [1,\n    2]\nb: 'it''s'\nc: one:two\nd: \"x: y\"\n") == {
            "a": [1, 2], "b": "it's", "c": "one:two", "d": "x: y"}

    def test_valid_files_have_no_slips(self):
        """Block scalars, multi-line flow collections and lists of mappings are not mistaken for slips."""
        text = ("a:\n  b: |\n    free\n      text\n  c: [1,\n      2]\n  d:\n  - e: 1\n    f: 2\n  - g\n"
                "  h: >-\n    folded\n  i: plain text\n    going on\n")
        assert load_yaml(text) and slips(text) == []
        for path in bundled("rules").glob("*.yaml"):
            assert slips(path.read_text(encoding="utf-8")) == [], path.name
