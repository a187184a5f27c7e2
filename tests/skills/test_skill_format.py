"""Every skill follows the Agent Skills spec (DESIGN 13, STACK "Agent skills"), checked by our
own rules and by the reference validator ``skills-ref`` (PyPI)."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.skills.skilldocs import SKILLS, frontmatter, links, markdown_files, skill_dirs

ALLOWED_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
EXPECTED = {"extra-rlhf", "extra-rlhf-l0-pipeline", "extra-rlhf-l1-campaigns", "extra-rlhf-l2-battle"}


def test_the_four_skills_exist():
    assert {d.name for d in skill_dirs()} == EXPECTED
    for name in ("mcp-tools", "data-format", "concepts"):
        assert (SKILLS / "extra-rlhf" / "references" / f"{name}.md").is_file()
    assert (SKILLS / "extra-rlhf" / "INSTALL.md").is_file()
    assert (SKILLS / "extra-rlhf" / "mcp" / "extra-rlhf.mcp.json").is_file()


@pytest.mark.parametrize("skill", sorted(EXPECTED))
def test_frontmatter_follows_the_spec(skill):
    meta_text, body = frontmatter(SKILLS / skill / "SKILL.md")
    meta = yaml.safe_load(meta_text)
    assert isinstance(meta, dict)
    assert set(meta) <= ALLOWED_KEYS, f"keys outside the spec: {set(meta) - ALLOWED_KEYS}"
    assert meta["name"] == skill
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta["name"]) and len(meta["name"]) <= 64
    description = meta["description"]
    assert isinstance(description, str) and 0 < len(description) <= 1024
    assert "<" not in description and ">" not in description
    assert "use" in description.lower(), "the description says when to use the skill"
    if "compatibility" in meta:
        assert isinstance(meta["compatibility"], str) and len(meta["compatibility"]) <= 500
    if "metadata" in meta:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta["metadata"].items())
    assert len(body.splitlines()) < 500


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(SKILLS)))
def test_relative_links_resolve_and_stay_one_level_deep(path):
    skill_root = SKILLS / path.relative_to(SKILLS).parts[0]
    for target in links(path):
        resolved = (path.parent / target).resolve()
        assert resolved.exists(), f"{path.name}: link {target} does not resolve"
        assert SKILLS.resolve() in resolved.parents, f"{path.name}: link {target} leaves skills/"
        if path.name == "SKILL.md":
            rel = resolved.relative_to(SKILLS.resolve())
            # its own files at most one folder down, or another skill's SKILL.md / references
            assert len(rel.parts) <= 3, f"{path.name}: {target} is nested too deep"
        else:  # a reference links only to SKILL.md files or its siblings: no chains of references
            assert resolved.name == "SKILL.md" or resolved.parent == path.parent.resolve() \
                or resolved.parent == skill_root.resolve(), f"{path.name}: {target} starts a reference chain"


def test_the_reference_validator_accepts_every_skill():
    validator = pytest.importorskip("skills_ref.validator")
    for skill in skill_dirs():
        assert validator.validate(skill) == [], skill.name


def test_the_reference_validator_rejects_a_broken_skill(tmp_path):
    """The validator is really run: a key outside the spec and a wrong name are caught."""
    validator = pytest.importorskip("skills_ref.validator")
    broken = tmp_path / "extra-rlhf"
    broken.mkdir()
    (broken / "SKILL.md").write_text("---\nname: other-name\ndescription: x\nversion: 1\n---\nbody\n")
    problems = " ".join(validator.validate(broken))
    assert "version" in problems and "must match skill name" in problems
