"""``snakemake --lint``: clean but for the lints a rule file accepts in a comment that names the lint and says why
(``# lint accepted (<title>): <reason>``), and no acceptance without its lint; every rule is defined whatever the
config (no rule inside an ``if``), so the lint of one config sees every rule and every rule file, and is the lint of
every config (the lints read the rules, not the jobs a config plans).
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from conftest import REPO, SNAKEMAKE, stand_in_image_folders

#: The config linted (each lint parses the whole workflow, ~3 CPU-s): the default one, image folders replaced by
#: stand-ins where a config names them (the DAG lists their images).
CONFIGS = ["config.yaml"]
ACCEPTED = re.compile(r"^# lint accepted \((?P<title>[^)]+)\): \S", re.MULTILINE)
RULE_FILES = sorted((REPO / "workflow" / "rules").glob("*.smk"))
#: One worker lints the shipped configs once for both tests that read the lints.
pytestmark = pytest.mark.xdist_group("lint")


def lints(output: str) -> list[tuple[str, str]]:
    """``(what, title)`` of each lint in ``snakemake --lint``'s text: ``what`` is the rule file's path for a
    snakefile's lint, ``rule NAME`` for a rule's."""
    found, where = [], None
    for line in output.splitlines():
        head = re.match(r"Lints for (snakefile (?P<file>\S+)|rule (?P<rule>\S+).*):$", line)
        if head:
            where = head["file"] or f"rule {head['rule']}"
        elif where and (item := re.match(r"    \* (?P<title>.+?):?$", line)):
            found.append((where, item["title"].rstrip(".:").rstrip(".")))
    return found


def accepted(path) -> set[str]:
    return {m["title"].rstrip(".") for m in ACCEPTED.finditer(open(path).read())}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> dict[str, list[tuple[str, str]]]:
    """The lints of each config of :data:`CONFIGS`."""
    result = {}
    for config in CONFIGS:
        where = tmp_path_factory.mktemp(config.removesuffix(".yaml"))
        stand_in = stand_in_image_folders(yaml.safe_load((REPO / "config" / config).read_text()), where)
        (where / config).write_text(yaml.safe_dump(stand_in, sort_keys=False))
        run = subprocess.run([SNAKEMAKE, "--lint", "--configfile", str(where / config)], cwd=REPO,
                             capture_output=True, text=True, timeout=300)
        result[config] = lints(run.stdout + run.stderr)
        assert run.returncode == 0 or result[config], (config, run.stderr[-3000:])
    return result


@pytest.mark.workflow
def test_snakemake_lint_is_clean_but_for_lints_accepted_with_a_reason(found):
    unjustified = {config: [(where, title) for where, title in items
                            if where.startswith("rule ") or title not in accepted(where)]
                   for config, items in found.items()}
    assert not any(unjustified.values()), unjustified


@pytest.mark.workflow
def test_every_accepted_lint_is_raised(found):
    raised = {(str(where), title) for items in found.values() for where, title in items}
    stale = [(path.name, title) for path in RULE_FILES for title in accepted(path) if (str(path), title) not in raised]
    assert not stale, stale


def test_no_rule_is_defined_inside_a_conditional():
    """Rules are always defined; rule all (Snakefile) chooses the targets from the config."""
    for path in RULE_FILES:
        nested = re.findall(r"^[ \t]+(?:rule|localrules)\b.*:$", path.read_text(), re.MULTILINE)
        assert not nested, (path.name, nested)


def test_lint_text_is_parsed():
    text = ("Lints for snakefile /x/a.smk:\n    * Mixed rules and functions in same snakefile.:\n      body\n"
            "Lints for rule r (line 3, /x/a.smk):\n    * No log directive defined:\n")
    assert lints(text) == [("/x/a.smk", "Mixed rules and functions in same snakefile"),
                           ("rule r", "No log directive defined")]
