"""``render`` is safe to point at real clusters: every name stays under ``-o``, a render is
written all or nothing, and every value reaches a shell command as exactly one word.

* Confinement: campaign stage names ``/abs/path``, ``../../x``, ``a/../../b`` are refused in one
  line (exit 2) before anything is written; so are a link inside ``-o`` that leads out of it,
  ``-o`` itself a link, and a render over the plan or the spec (unless ``--force``; a name never
  leaves ``-o``, even forced).
* Atomicity: a write that fails part-way (``os.replace`` or ``os.fsync`` failing) leaves the
  previous render byte for byte, for a plan and for a campaign (all stages in one write).
* Quoting: hostile values (``;``, ``$()``, backticks, both quotes, newlines, U+2028, ``#``)
  through every user-controllable input of ``render`` (``--cluster``, ``--image``,
  ``--framework``, campaign stage names) are refused in one line; and below that refusal, fed
  straight to the renderers of every target, each value comes back from ``shlex.split`` of
  every rendered shell command (launch scripts, SkyPilot ``setup``/``run``, the RayJob
  entrypoint and ``rayStartParams``, the guard's container command) as exactly one word, with
  every other word unchanged, and every YAML, JSON and HCL file parses to the same document
  with the value in place. A plan whose spec and pool names are hostile renders commands of
  the same words (the names are sanitised) that bash accepts.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import ptplan.rendering.targets as targets
from ptplan.cli.app import app
from ptplan.core.errors import InputError
from ptplan.planfile.load import load_plan
from ptplan.planfile.schema import Plan
from ptplan.rendering.checks.readers import _hcl
from ptplan.rendering.targets import RENDERERS, render_plan, write_files
from ptplan.spec.project import load_spec

ROOT = Path(__file__).resolve().parent.parent
PLANS = Path(__file__).parent / "data" / "plans"
EXAMPLE_CAMPAIGN = ROOT / "examples" / "campaign-cheap-teacher.yaml"
runner = CliRunner()

HOSTILE = ["x; id #", "$(id)", "`id`", "a'b\"c", "a\nb", "a\u2028b", "#x", "a b", "'",
           "x\"; touch /tmp/pwned; echo \"", "$'\\x41'"]
"""Shell metacharacters, both quotes, a newline, U+2028 (a line break to YAML 1.1 readers and
JavaScript) and ``#`` (a comment when it starts a word)."""
PINNED = "registry.example/ptplan-guard:0.2@sha256:" + "a" * 64
"""A benign guard image (the guard target needs an image with ptplan installed)."""


def _plan(name: str) -> Path:
    return PLANS / f"{name}.json"


def _spec(name: str) -> Path:
    return PLANS / f"{name}.spec.yaml"


def _one_error(output: str, strict: bool = False) -> str:
    """One ``error:`` line, after the render's ``note:`` lines (``strict``: nothing else)."""
    lines = output.strip("\n").splitlines()
    errors = [ln for ln in lines if not ln.startswith("note: ")]
    assert len(errors) == 1 and errors[0].startswith("error: "), output
    assert not strict or len(lines) == 1, output
    return errors[0]


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def _render(*args: str) -> Any:
    return runner.invoke(app, ["render", *args])


# ---- A/C: names stay under -o ---------------------------------------------------------------


def _campaign_with(name: Any) -> dict[str, Any]:
    """A campaign JSON with the keys ``render`` reads, its one stage called ``name``."""
    return {"kind": "campaign", "stages": [{"name": name, "spec": "s.yaml", "after": [],
                                            "plan": {}, "start_hours": 0, "end_hours": 1}],
            "stored": [], "handovers": [], "deadline_hours": 10, "budget_usd": None,
            "makespan_hours": 1, "stages_cost_usd": 1, "handover_cost_usd": 0,
            "total_cost_usd": 1}


@pytest.mark.parametrize("stage", ["/abs/path", "../../x", "a/../../b", "..", ".", "a/b", "",
                                   "a\nb", "-rf", 7])
def test_campaign_stage_names_are_refused_before_anything_is_written(
        tmp_path: Path, stage: Any) -> None:
    out = tmp_path / "deep" / "er" / "out"
    if stage == "/abs/path":
        stage = str(tmp_path / "abs" / "path")
    f = tmp_path / "c.json"
    f.write_text(json.dumps(_campaign_with(stage)), encoding="utf-8")
    before = sorted(p for p in tmp_path.rglob("*"))
    for cmd in (["render", str(f), "--target", "kueue", "-o", str(out)],
                ["render", str(f), "--target", "all", "-o", str(out), "--force"],
                ["check", str(f)]):
        res = runner.invoke(app, cmd)
        assert res.exit_code == 2, (cmd, res.output)
        line = _one_error(res.output, strict=True)
        assert "stages[0].name" in line and repr(stage) in line, line
    assert sorted(p for p in tmp_path.rglob("*")) == before  # nothing written anywhere


def test_a_repeated_stage_name_is_refused(tmp_path: Path) -> None:
    c = _campaign_with("a")
    c["stages"].append(dict(c["stages"][0]))
    f = tmp_path / "c.json"
    f.write_text(json.dumps(c), encoding="utf-8")
    res = _render(str(f), "--target", "kueue", "-o", str(tmp_path / "out"))
    assert res.exit_code == 2 and "names two stages" in _one_error(res.output)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["/etc/x", "../x", "a/../../x", "a/./b", "a//b", "a\\b",
                                  "a\x00b", ""])
def test_write_files_confines_every_name(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out"
    with pytest.raises(InputError) as exc:
        write_files({"ok/file.yaml": "a: 1\n", name: "x"}, out)
    assert "\n" not in str(exc.value)
    assert not out.exists() or _tree(out) == {}
    assert sorted(p.name for p in tmp_path.iterdir()) in (["out"], [])


def test_a_link_inside_o_that_leads_out_is_refused_even_forced(tmp_path: Path) -> None:
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (out / "kueue").symlink_to(outside, target_is_directory=True)
    for extra in ([], ["--force"]):
        res = _render(str(_plan("grpo-aws")), "--target", "kueue", "-o", str(out), *extra)
        assert res.exit_code == 2, res.output
        assert "outside the output directory" in _one_error(res.output)
        assert list(outside.iterdir()) == []
    # a file that is a link to a file outside: refused, forced or not; the outside file kept
    (out / "kueue").unlink()
    (out / "kueue").mkdir()
    victim = outside / "victim"
    victim.write_text("keep\n", encoding="utf-8")
    (out / "kueue" / "queues.yaml").symlink_to(victim)
    for extra in ([], ["--force"]):
        res = _render(str(_plan("grpo-aws")), "--target", "kueue", "-o", str(out), *extra)
        assert res.exit_code == 2, res.output
        _one_error(res.output)
        assert victim.read_text(encoding="utf-8") == "keep\n"


def test_a_link_inside_o_to_a_file_inside_is_replaced_only_when_forced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "kueue").mkdir(parents=True)
    kept = out / "kept.yaml"
    kept.write_text("keep\n", encoding="utf-8")
    (out / "kueue" / "queues.yaml").symlink_to(kept)
    res = _render(str(_plan("grpo-aws")), "--target", "kueue", "-o", str(out))
    assert res.exit_code == 2 and "symbolic link" in _one_error(res.output)
    res = _render(str(_plan("grpo-aws")), "--target", "kueue", "-o", str(out), "--force")
    assert res.exit_code == 0, res.output
    assert not (out / "kueue" / "queues.yaml").is_symlink()  # the link replaced ...
    assert kept.read_text(encoding="utf-8") == "keep\n"  # ... never its target


def test_o_itself_a_link_is_refused_unless_forced(tmp_path: Path) -> None:
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real, target_is_directory=True)
    res = _render(str(_plan("grpo-aws")), "--target", "kueue", "-o", str(link))
    assert res.exit_code == 2, res.output
    line = _one_error(res.output)
    assert line.startswith("error: -o:") and "symbolic link" in line
    assert list(real.iterdir()) == []
    res = _render(str(_plan("grpo-aws")), "--target", "kueue", "-o", str(link), "--force")
    assert res.exit_code == 0, res.output
    assert (real / "kueue" / "queues.yaml").is_file() and link.is_symlink()


def test_o_a_file_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x\n", encoding="utf-8")
    res = _render(str(_plan("grpo-aws")), "--target", "kueue", "-o", str(f))
    assert res.exit_code == 2 and "-o" in _one_error(res.output)
    assert f.read_text(encoding="utf-8") == "x\n"


def test_render_over_its_own_plan_or_spec_is_refused_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "kueue").mkdir(parents=True)
    plan = out / "kueue" / "queues.yaml"  # the plan sits where the render would write
    shutil.copy(_plan("grpo-aws"), plan)
    original = plan.read_bytes()
    res = _render(str(plan), "--target", "kueue", "-o", str(out))
    assert res.exit_code == 2, res.output
    assert "input" in _one_error(res.output) and "--force" in res.output
    assert plan.read_bytes() == original
    # the spec too
    (out / "launch").mkdir()
    spec = out / "launch" / "verl.sh"
    shutil.copy(_spec("grpo-aws"), spec)
    res = _render(str(_plan("grpo-aws")), "--target", "kuberay", "--spec", str(spec), "-o",
                  str(out))
    assert res.exit_code == 2 and "input" in _one_error(res.output)
    assert spec.read_bytes() == _spec("grpo-aws").read_bytes()
    res = _render(str(plan), "--target", "kueue", "-o", str(out), "--force")
    assert res.exit_code == 0, res.output
    assert plan.read_bytes() != original


# ---- C: all or nothing ----------------------------------------------------------------------


def _failing(real: Any, fail_at: int) -> Any:
    """``real`` failing once, at its ``fail_at``-th call (a full disk, an I/O error)."""
    calls = {"n": 0}

    def fake(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    return fake


@pytest.mark.parametrize(("what", "fail_at"), [("replace", 1), ("replace", 4), ("replace", 9),
                                               ("fsync", 1), ("fsync", 3)])
def test_a_failing_write_leaves_the_previous_render(tmp_path: Path, what: str, fail_at: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    args = [str(_plan("grpo-aws")), "--target", "all", "--spec", str(_spec("grpo-aws")), "-o",
            str(out)]
    res = _render(*args, "--cluster", "first")
    assert res.exit_code == 0, res.output
    before = _tree(out)
    assert len(before) > 5
    monkeypatch.setattr(os, what, _failing(getattr(os, what), fail_at))
    res = _render(*args, "--cluster", "second")  # changes the Karpenter and Terraform files
    monkeypatch.undo()
    assert res.exit_code == 2, res.output
    line = _one_error(res.output)
    assert "-o" in line and "nothing was changed" in line
    assert _tree(out) == before  # byte for byte, no file new, none missing, no temporaries
    assert not [p for p in out.rglob("*") if p.name.startswith(".")]
    res = _render(*args, "--cluster", "second")
    assert res.exit_code == 0 and _tree(out) != before


@pytest.fixture(scope="module")
def campaign_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("campaign") / "campaign.json"
    res = runner.invoke(app, ["-q", "plan", str(EXAMPLE_CAMPAIGN), "--format", "json", "-o",
                              str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_a_campaign_is_written_in_one_piece(campaign_json: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    args = [str(campaign_json), "--target", "karpenter", "-o", str(out)]
    res = _render(*args, "--cluster", "first")
    assert res.exit_code == 0, res.output
    before = _tree(out)
    stages = {rel.split("/")[0] for rel in before}
    assert len(stages) == 3, stages
    # the last stage's files are renamed last: fail there, and no stage is changed
    monkeypatch.setattr(os, "replace", _failing(os.replace, 2 * len(before)))
    res = _render(*args, "--cluster", "second")
    monkeypatch.undo()
    assert res.exit_code == 2 and "nothing was changed" in _one_error(res.output)
    assert _tree(out) == before
    res = _render(*args, "--cluster", "second")
    assert res.exit_code == 0 and _tree(out) != before
    # the campaign file itself is an input
    target = out / sorted(before)[0]
    target.unlink()
    shutil.copy(campaign_json, target)
    res = _render(str(target), "--target", "karpenter", "-o", str(out))
    assert res.exit_code == 2 and "input" in _one_error(res.output)


# ---- B: quoting ---------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["--cluster", "--image", "--framework"])
@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_option_values_are_refused_in_one_line(tmp_path: Path, option: str,
                                                       value: str) -> None:
    out = tmp_path / "out"
    for target in ("all", "guard", "budgets", "karpenter"):
        res = _render(str(_plan("grpo-aws")), "--target", target, "--spec",
                      str(_spec("grpo-aws")), "-o", str(out), option, value)
        assert res.exit_code == 2, (target, res.output)
        line = _one_error(res.output, strict=True)
        assert line.startswith(f"error: {option}"), line
        assert repr(value) in line or value in line, line
    assert not out.exists()


@pytest.mark.parametrize("value", ["a b", "x;y", "a\nb"])
def test_hostile_stage_names_are_refused_in_one_line(tmp_path: Path, value: str) -> None:
    f = tmp_path / "c.json"
    f.write_text(json.dumps(_campaign_with(value)), encoding="utf-8")
    res = _render(str(f), "--target", "all", "-o", str(tmp_path / "out"))
    assert res.exit_code == 2 and repr(value) in _one_error(res.output, strict=True)


def test_real_names_are_accepted() -> None:
    targets.check_options("my_eks-cluster-1", "123456789012.dkr.ecr.us-east-1.amazonaws.com/"
                          "team/verl:vllm012-2025.01@sha256:" + "0" * 64)
    targets.check_options("gke-prod", "localhost:5000/verl:latest")
    targets.check_options("ptplan", None)


def _sky_scripts(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(k, doc[k]) for k in ("setup", "run") if isinstance(doc.get(k), str)]


def _containers(obj: Any) -> list[dict[str, Any]]:
    """Every container (with ``command`` or ``args``) anywhere in a Kubernetes object."""
    found: list[dict[str, Any]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("containers", "initContainers") and isinstance(v, list):
                found += [c for c in v if isinstance(c, dict)]
            else:
                found += _containers(v)
    elif isinstance(obj, list):
        for v in obj:
            found += _containers(v)
    return found


def commands(files: dict[str, str]) -> list[tuple[str, str, Any]]:
    """Every shell command in a render: (where, kind, text). ``kind`` is ``sh`` for a string
    a shell parses, ``argv`` for an argument vector run without a shell."""
    out: list[tuple[str, str, Any]] = []
    for rel, text in files.items():
        if rel.endswith(".sh"):
            out.append((rel, "sh", text))
        elif rel.endswith(".tf"):
            assert "local-exec" not in text and "remote-exec" not in text, rel
        elif rel.endswith(".yaml"):
            for i, doc in enumerate(d for d in yaml.safe_load_all(text) if d):
                where = f"{rel}[{i}]"
                for key, script in _sky_scripts(doc):
                    out.append((f"{where}.{key}", "sh", script))
                if doc.get("kind") == "RayJob":
                    spec = doc["spec"]
                    out.append((f"{where}.entrypoint", "sh", spec["entrypoint"]))
                    cluster = spec["rayClusterSpec"]
                    groups = [cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])]
                    for g in groups:  # KubeRay pastes these into `ray start` (bash)
                        params = g.get("rayStartParams", {})
                        out.append((f"{where}.rayStartParams", "sh",
                                    " ".join(f"--{k}={v}" for k, v in params.items())))
                for c in _containers(doc):
                    argv = [*c.get("command", []), *c.get("args", [])]
                    if argv[:2] in (["sh", "-c"], ["bash", "-c"], ["/bin/sh", "-c"]):
                        out.append((f"{where}.{c['name']}", "sh", argv[2]))
                        out.append((f"{where}.{c['name']}", "argv", argv[:2] + argv[3:]))
                    elif argv:
                        out.append((f"{where}.{c['name']}", "argv", argv))
    return out


def _words(kind: str, text: Any) -> list[str]:
    return shlex.split(text, comments=True) if kind == "sh" else list(text)


def _same(base: Any, evil: Any, marker: str, value: str) -> bool:
    """``evil`` is ``base`` with ``value`` where ``marker`` was: as it is, or (in a string that
    is a shell command, checked word by word above) as one shell word."""
    if isinstance(base, str):
        return isinstance(evil, str) and evil in (base.replace(marker, value),
                                                  base.replace(marker, shlex.quote(value)))
    if isinstance(base, list):
        return (isinstance(evil, list) and len(base) == len(evil)
                and all(_same(b, e, marker, value) for b, e in zip(base, evil, strict=True)))
    if isinstance(base, dict):
        return (isinstance(evil, dict) and list(evil) == [k.replace(marker, value) for k in base]
                and all(_same(base[k], evil[k.replace(marker, value)], marker, value)
                        for k in base))
    return base == evil


def _parsed(rel: str, text: str) -> Any:
    if rel.endswith(".yaml"):
        return [d for d in yaml.safe_load_all(text) if d]
    if rel.endswith(".json"):
        return json.loads(text)
    if rel.endswith(".tf"):
        return _hcl(text)
    return None


def _bash_ok(script: str, where: str) -> None:
    if shutil.which("bash") is None:
        return
    res = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, (where, res.stderr)


def _render_unchecked(monkeypatch: pytest.MonkeyPatch, plan: Plan, target: str, spec: Any,
                      **kw: Any) -> dict[str, str]:
    """``render_plan`` without the option check: what the renderers would write."""
    monkeypatch.setattr(targets, "check_options", lambda *a, **k: None)
    files, _ = render_plan(plan, target, spec, **kw)
    return files


MARK = {"cluster": "qqclusterqq", "image": "qqimageqq"}
CASES = [("grpo-aws", t) for t in (*RENDERERS, "all") if t not in ("terraform-gcp",)] + \
        [("grpo-gcp", t) for t in ("skypilot", "kuberay", "karpenter", "terraform-gcp",
                                   "guard", "budgets")] + \
        [("opd-aws-mixed", "all"), ("sft-gcp", "all")]


# the guard target's --image is the guard's own pinned image (covered by the YAML checks of
# the other cases), so it is not fed hostile values here
OPTION_CASES = [(name, target, option) for name, target in CASES
                for option in ("cluster", "image") if not (option == "image" and target == "guard")]


@pytest.mark.parametrize(("name", "target", "option"), OPTION_CASES)
def test_every_value_reaches_every_command_as_one_word(
        monkeypatch: pytest.MonkeyPatch, name: str, target: str, option: str) -> None:
    plan, spec = load_plan(_plan(name)), load_spec(str(_spec(name)))

    def render(value: str) -> dict[str, str]:
        kw = {"cluster": MARK["cluster"], "image": PINNED if target == "guard" else None}
        if option == "cluster" or target != "guard":
            kw[option] = value
        return _render_unchecked(monkeypatch, plan, target, spec, **kw)

    marker = MARK[option]
    base = render(marker)
    base_cmds = commands(base)
    assert base_cmds or target in ("kueue", "karpenter", "lifecycle", "budgets", "terraform-aws",
                                   "terraform-gcp"), target
    for value in HOSTILE:
        evil = render(value)
        assert sorted(evil) == sorted(base)
        evil_cmds = commands(evil)
        assert len(evil_cmds) == len(base_cmds)
        for (where, kind, b), (_, _, e) in zip(base_cmds, evil_cmds, strict=True):
            wb, we = _words(kind, b), _words(kind, e)
            # the value is one word where the marker was; every other word as it was
            assert we == [w.replace(marker, value) for w in wb], (where, value)
            if kind == "sh":
                _bash_ok(e, where)
        for rel, text in evil.items():
            parsed = _parsed(rel, text)
            if parsed is None:
                continue
            # python-hcl2 decodes a string's escapes but keeps ``$${`` / ``%%{`` as written
            escaped = (value.replace("${", "$${").replace("%{", "%%{") if rel.endswith(".tf")
                       else value)
            assert _same(_parsed(rel, base[rel]), parsed, marker, escaped), (rel, value)
            if rel.endswith(".yaml"):
                assert "\u2028" not in text  # JSON-escaped, never raw (YAML 1.1 line break)


def _hostile_plan(plan: Plan) -> Plan:
    evil = "x;id #$(id)`id`'\"\n\u2028 \\"
    d = plan.model_dump(mode="json")
    d["spec_name"] = evil
    renames = {p["name"]: f"{p['name']}{evil}" for p in d["pools"]}
    for p in d["pools"]:
        p["name"] = renames[p["name"]]
    for ph in d["phases"]:
        ph["pool"] = renames[ph["pool"]]
    return Plan.model_validate(d)


@pytest.mark.parametrize("name", ["grpo-aws", "grpo-gcp", "opd-aws-mixed", "sft-gcp"])
def test_hostile_plan_names_leave_every_command_the_same_words(
        monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Spec and pool names reach commands (the project's slug, Ray resources, group names) only
    sanitised: the commands have the same words, each still one word, and parse in bash."""
    plan, spec = load_plan(_plan(name)), load_spec(str(_spec(name)))
    import ptplan.rendering.targets as r

    facts = r.facts_for(plan, spec)  # the spec digest check is the spec's business
    monkeypatch.setattr(r, "facts_for", lambda p, s=None: facts)
    for target in ("all", "guard"):
        base = _render_unchecked(monkeypatch, plan, target, None, image=PINNED)
        evil = _render_unchecked(monkeypatch, _hostile_plan(plan), target, None, image=PINNED)
        assert len(base) == len(evil)
        base_cmds, evil_cmds = commands(base), commands(evil)
        assert len(base_cmds) == len(evil_cmds)
        for (where, kind, b), (_, _, e) in zip(base_cmds, evil_cmds, strict=True):
            wb, we = _words(kind, b), _words(kind, e)
            assert len(wb) == len(we), where
            assert not any(w in ("id", "#", "`id`", "$(id)") for w in we), where
            if kind == "sh":
                _bash_ok(e, where)
        for rel, text in evil.items():
            if rel.endswith((".yaml", ".json", ".tf")):
                _parsed(rel, text)


def test_the_sh_filter_and_python_code_share_one_quoting_function() -> None:
    import ptplan.templates as t

    for value in HOSTILE:
        assert t.sh(value) == t.shell_word(value) == shlex.quote(value)
        assert shlex.split(t.shell_join([value, value])) == [value, value]
    src = "\n".join(p.read_text(encoding="utf-8")
                    for p in (ROOT / "optimizer" / "rendering").rglob("*.py"))
    assert "shlex.quote" not in src and "shlex.join" not in src
