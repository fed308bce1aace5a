"""Docs that cannot rot: what README.md, studies/README.md and docs/*.md show must work as shown.

- Every ```yaml block is checked: a study (or a fragment of one: any study key at the top) through
  the real loader, as if the file lived in studies/ (so `include: ../search_spaces/x.yaml` and
  `extends: quickstart.yaml` resolve as they would there); a bare trial fragment (`model:`,
  `data:`, `train:` at the top) as the base trial of a study; a search space through the space
  loader; a Kubernetes manifest (`apiVersion:`) only has to parse. A failure names the block's line.
- Every `vitscale ...` line in the code blocks of README.md and of the docs it hands details to
  (docs/results.md, docs/operations.md, docs/performance.md) parses against the real CLI: its
  subcommands exist, its options are the command's, it has no extra arguments, and the study files
  it names exist. Those whose command is on the CHEAP list also run and exit 0; EXPENSIVE ones (Ray,
  training, benchmarks, servers) are not run, and a command on neither list fails the test until
  someone classifies it. Each command of README's CLI reference table answers `--help`, and every
  model flag the README names is in `vitscale model info --help`.
- README.md stays a page a new user reads: at most README_MAX_LINES lines.
- Links stay inside the repository and exist, and their #anchors are headings of their target;
  docs/architecture.md's layer table is tests/test_layering.py's LAYERS, and the modules, functions
  and files it names exist; studies/README.md's table lists every shipped study with its trial count.

The commands run in one subprocess (the venv's interpreter, from the repo root) that calls
`vitscale.cli.main(argv)` for each, so torch and the CLI are imported once.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.main
import yaml
from typer.core import TyperGroup

from vitscale.cli import USAGE_ERRORS
from vitscale.cli.app import app
from vitscale.study import SpecError, count_trials, is_space_file, load_space, load_study

ROOT = Path(__file__).resolve().parents[1]
STUDIES_README = "studies/README.md"
DETAIL_DOCS = ("docs/results.md", "docs/operations.md", "docs/performance.md")  # what README links out to
YAML_DOCS = ("README.md", STUDIES_README, *DETAIL_DOCS)
COMMAND_DOCS = ("README.md", *DETAIL_DOCS)
README_MAX_LINES = 300
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.S | re.M)
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
TRIAL_SECTIONS = {"model", "data", "train"}

# Commands (the words after `vitscale`) safe to run in a test: they read files and print.
CHEAP = {"study validate", "study show", "study schema", "model info"}
# Commands that start Ray, train, benchmark, talk to a cluster or serve a UI: never run here.
EXPENSIVE = {
    "study run",
    "study resume",
    "study submit",
    "study status",
    "study logs",
    "train",
    "evaluate",
    "bench",
    "analyze",
    "data info",
    "data generate",
    "ui",
    "dashboard",
    "demo",
}
SEPARATORS = {"&&", "||", ";", "|", "&"}
REDIRECTS = {">", ">>", "<", "2>", "&>"}


@dataclass(frozen=True)
class Block:
    doc: str
    line: int  # line of the opening fence in the markdown file
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


@dataclass(frozen=True)
class Command:
    where: str  # doc:line of the command in the markdown file
    argv: tuple[str, ...]  # after `vitscale`, globs expanded against the repo root
    redirect: str | None  # the file the doc sends stdout to, if any

    @property
    def name(self) -> str:
        """The command as CHEAP / EXPENSIVE spell it: its leading subcommand words."""
        words = [w for w in self.argv[:2] if re.fullmatch(r"[a-z][a-z-]*", w)]
        if len(words) == 2 and " ".join(words) in CHEAP | EXPENSIVE:
            return " ".join(words)
        return words[0] if words else ""


def blocks(text: str, doc: str) -> list[Block]:
    return [
        Block(doc, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)) for m in FENCE.finditer(text)
    ]


def doc_blocks(docs: tuple[str, ...], langs: set[str]) -> list[Block]:
    out = []
    for doc in docs:
        out += [b for b in blocks((ROOT / doc).read_text(), doc) if b.lang in langs]
    return out


# ---------------------------------------------------------------- YAML blocks


@pytest.fixture(scope="module")
def studies_dir(tmp_path_factory) -> Path:
    """A stand-in for studies/ beside search_spaces/: links to every shipped file, room for blocks."""
    base = tmp_path_factory.mktemp("docs")
    for folder in ("studies", "search_spaces"):
        (base / folder).mkdir()
        for path in (ROOT / folder).iterdir():
            (base / folder / path.name).symlink_to(path)
    return base / "studies"


def check_yaml_block(block: Block, studies: Path) -> str:
    """Validate one block as what it is; return that kind. Raises AssertionError naming the block."""
    try:
        raw = yaml.safe_load(block.text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = block.line + 1 + mark.line if mark else block.line
        raise AssertionError(f"{block.doc}:{line}: the ```yaml block does not parse: {exc}") from None
    if not isinstance(raw, dict):
        raise AssertionError(f"{block.where}: a ```yaml block should be a mapping, got {type(raw).__name__}")
    if "apiVersion" in raw:
        return "manifest"  # Kubernetes: parsing is all we can check here
    if is_space_file(raw) and set(raw) <= TRIAL_SECTIONS and not _looks_like_space(raw):
        kind, raw = "trial", {"name": "doc-block", "trial": raw}
    elif is_space_file(raw):
        kind = "space"
    else:
        kind = "study"
        raw.setdefault("name", "doc-block")  # a fragment showing some keys of a study
    stem = f"{Path(block.doc).stem.lower()}-line{block.line}"
    folder = studies if kind != "space" else studies.parent / "search_spaces"
    path = folder / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        if kind == "space":
            load_space(path)
        else:
            load_study(path)
    except SpecError as exc:
        lines = [line.replace(str(path), f"{block.where} ({kind} block)") for line in exc.lines]
        raise AssertionError("\n".join(lines)) from None
    finally:
        path.unlink()
    return kind


def _looks_like_space(raw: dict) -> bool:
    """Search-space parameters are one-key distributions ({choice: ...}) or an include."""
    kinds = {"choice", "grid", "int", "uniform", "loguniform"}
    return all(k == "include" or (isinstance(v, dict) and kinds & set(v)) for k, v in raw.items())


YAML_BLOCKS = doc_blocks(YAML_DOCS, {"yaml", "yml"})


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=[b.where for b in YAML_BLOCKS])
def test_yaml_block_validates(block, studies_dir):
    check_yaml_block(block, studies_dir)


def test_yaml_blocks_are_found():
    """The extraction itself: the README's headline study is among the blocks, as a study."""
    assert len(YAML_BLOCKS) >= 4
    assert any(b.doc == "README.md" and "name: ssog-width-sweep" in b.text for b in YAML_BLOCKS)


def test_a_broken_block_fails_naming_its_line(studies_dir):
    md = "# doc\n\ntext\n\n```yaml\nname: x\ntrial: {model: {heads: 5}}\n```\n"
    (block,) = blocks(md, "DOC.md")
    with pytest.raises(
        AssertionError, match=r"DOC\.md:5 \(study block\): trial\.model\.heads: 5 does not divide"
    ):
        check_yaml_block(block, studies_dir)
    space = Block("DOC.md", 9, "yaml", "model.width: {choice: []}\n")
    with pytest.raises(AssertionError, match=r"DOC\.md:9 \(space block\): model\.width"):
        check_yaml_block(space, studies_dir)
    broken = Block("DOC.md", 20, "yaml", "name: ok\ntrial: [\n")
    with pytest.raises(AssertionError, match=r"DOC\.md:2[23]: the ```yaml block does not parse"):
        check_yaml_block(broken, studies_dir)


# ---------------------------------------------------------------- commands


def commands(block: Block) -> list[Command]:
    """The `vitscale ...` commands of a shell block: continuations joined, comments dropped,
    `a && b` split, a `> file` redirect noted and removed, globs expanded from the repo root."""
    out: list[Command] = []
    lines = block.text.split("\n")
    i = 0
    while i < len(lines):
        start, text = i, lines[i]
        while text.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text.rstrip()[:-1] + " " + lines[i]
        i += 1
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
        for part in _split(tokens):
            if not part or part[0] != "vitscale":
                continue
            argv, redirect = _redirect(part[1:])
            argv = [expanded for token in argv for expanded in _glob(token)]
            out.append(Command(f"{block.doc}:{block.line + 1 + start}", tuple(argv), redirect))
    return out


def _split(tokens: list[str]) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in SEPARATORS:
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def _redirect(tokens: list[str]) -> tuple[list[str], str | None]:
    for n, token in enumerate(tokens):
        if token in REDIRECTS:
            return tokens[:n], tokens[n + 1] if n + 1 < len(tokens) else None
    return tokens, None


def _glob(token: str) -> list[str]:
    if not re.search(r"[*?[]", token):
        return [token]
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(str(ROOT / token))) or [token]


DOC_COMMANDS = [c for b in doc_blocks(COMMAND_DOCS, SHELL_LANGS) for c in commands(b)]
CHEAP_COMMANDS = [c for c in DOC_COMMANDS if c.name in CHEAP or "--help" in c.argv]


def reference_commands() -> list[Command]:
    """`<command> --help` for each command of README's CLI reference table."""
    out = []
    for n, line in enumerate((ROOT / "README.md").read_text().split("\n"), start=1):
        if not line.startswith("| `vitscale "):
            continue
        for text in re.findall(r"`vitscale ([^`]*)`", line):
            words = []
            for word in text.split():
                if not re.fullmatch(r"[a-z][a-z-]*", word) or len(words) == 2:
                    break
                words.append(word)
            out.append(Command(f"README.md:{n}", (*words, "--help"), None))
    return out


REFERENCE_COMMANDS = reference_commands()
MODEL_HELP = Command("README.md (model flags)", ("model", "info", "--help"), None)

DRIVER = r"""
import contextlib, io, json, sys, traceback
from vitscale.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = "exception"
    results.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
with open(sys.argv[2], "w") as f:
    json.dump(results, f)
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict[tuple[str, ...], dict]:
    """argv -> {code, out, err} for every command to run, from one subprocess at the repo root."""
    argvs = list(dict.fromkeys(c.argv for c in [*CHEAP_COMMANDS, *REFERENCE_COMMANDS, MODEL_HELP]))
    result_file = tmp_path_factory.mktemp("cli") / "results.json"
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(argvs), str(result_file)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"the command driver failed:\n{proc.stdout}\n{proc.stderr}"
    return dict(zip(argvs, json.loads(result_file.read_text()), strict=True))


def _explain(command: Command, result: dict) -> str:
    shown = " ".join(shlex.quote(a) for a in command.argv)
    return f"{command.where}: `vitscale {shown}` exited {result['code']}:\n{result['err'][-3000:]}"


CLI = typer.main.get_command(app)
SHIPPED_FOLDERS = ("studies/", "search_spaces/")


def parse_error(argv: tuple[str, ...]) -> str | None:
    """Why the real CLI would refuse `vitscale <argv>`, or None. Runs click's parser level by level
    (no value converted, no callback run), so placeholders like RUN_ID pass, while an unknown
    subcommand or option, an option without its value, an extra argument or a missing shipped study
    file does not."""
    command, ctx, name, rest = CLI, None, "vitscale", list(argv)
    try:
        while True:
            ctx = command.context_class(command, info_name=name, parent=ctx, **command.context_settings)
            _, rest, _ = command.make_parser(ctx).parse_args(rest)
            if not isinstance(command, TyperGroup) or not rest:
                break
            name, command, rest = command.resolve_command(ctx, rest)
    except USAGE_ERRORS as exc:
        return exc.format_message()
    if rest and not ctx.allow_extra_args:
        return f"`{ctx.command_path}` got extra arguments {rest}"
    missing = [a for a in argv if a.startswith(SHIPPED_FOLDERS) and not (ROOT / a).exists()]
    return f"no such file: {missing}" if missing else None


@pytest.mark.parametrize(
    "command", DOC_COMMANDS, ids=[f"{c.where} {' '.join(c.argv)}"[:80] for c in DOC_COMMANDS]
)
def test_doc_command_parses(command):
    error = parse_error(command.argv)
    assert error is None, f"{command.where}: `vitscale {' '.join(command.argv)}`: {error}"


def test_a_stale_command_fails_to_parse():
    """The parse check itself: a renamed flag or command, an extra argument and a missing study file fail."""
    assert parse_error(("study", "run", "studies/quickstart.yaml", "--num-cpus", "2", "--set", "a=1")) is None
    assert parse_error(("evaluate", "RUN_ID", "--resolutions", "16,24", "--split", "val")) is None
    assert "--no-such-flag" in parse_error(("study", "run", "studies/quickstart.yaml", "--no-such-flag"))
    assert "runn" in parse_error(("study", "runn", "studies/quickstart.yaml"))
    assert "extra" in parse_error(("evaluate", "RUN_ID", "OTHER", "--resolutions", "16"))
    assert "studies/no_such_study.yaml" in parse_error(("study", "run", "studies/no_such_study.yaml"))


def test_every_doc_command_is_classified():
    unknown = [
        f"{c.where}: `vitscale {' '.join(c.argv)}`: not a command this test knows: fix the doc, or add {c.name!r} to CHEAP or EXPENSIVE"
        for c in DOC_COMMANDS
        if c.name not in CHEAP | EXPENSIVE and "--help" not in c.argv
    ]
    assert not unknown, "\n".join(unknown)


@pytest.mark.parametrize(
    "command", CHEAP_COMMANDS, ids=[f"{c.where} {' '.join(c.argv)}"[:80] for c in CHEAP_COMMANDS]
)
def test_readme_command_runs(command, ran):
    result = ran[command.argv]
    assert result["code"] == 0, _explain(command, result)
    if command.redirect and command.redirect.endswith(".json"):
        json.loads(result["out"])  # what the README sends to a .json file is JSON


def test_readme_runs_some_commands():
    """The extraction itself: the README's validate/show/schema/model info lines are found, and
    each detail doc has commands of its own."""
    assert {c.name for c in CHEAP_COMMANDS if c.where.startswith("README.md:")} >= CHEAP
    assert {c.where.split(":")[0] for c in DOC_COMMANDS} == set(COMMAND_DOCS)
    assert any(
        c.argv[:2] == ("study", "validate") and len(c.argv) > 5 for c in CHEAP_COMMANDS
    )  # glob expanded


@pytest.mark.parametrize("command", REFERENCE_COMMANDS, ids=[" ".join(c.argv) for c in REFERENCE_COMMANDS])
def test_cli_reference_command_exists(command, ran):
    result = ran[command.argv]
    assert result["code"] == 0 and "Usage" in result["out"], _explain(command, result)


def test_readme_model_flags_exist(ran):
    """Each flag of README's "Model flags are generated ..." paragraph is a flag of `model info`."""
    text = (ROOT / "README.md").read_text()
    paragraph = text[text.index("Model flags are generated") :].split("\n\n")[0]
    flags = set()
    for flag in re.findall(r"--(?:\[no-\])?[a-z][a-z0-9-]*", paragraph):
        if flag.startswith("--[no-]"):
            flags |= {"--" + flag[7:], "--no-" + flag[7:]}
        else:
            flags.add(flag)
    flags -= {"--help", "--<section>-<setting>"}
    assert len(flags) > 10
    result = ran[MODEL_HELP.argv]
    assert result["code"] == 0, _explain(MODEL_HELP, result)
    offered = set(re.findall(r"--[a-z][a-z0-9-]*", result["out"]))
    assert not flags - offered, (
        f"README.md names model flags `model info` does not have: {sorted(flags - offered)}"
    )


# ---------------------------------------------------------------- size, links and names


def test_readme_is_a_page():
    """README.md is what a new user reads: details belong in docs/, linked from it."""
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, more than {README_MAX_LINES}: move details to docs/results.md, "
        "docs/operations.md or docs/performance.md and link them in one line"
    )


def _prose(text: str) -> str:
    """The markdown without its fenced code blocks."""
    return FENCE.sub("", text)


@pytest.mark.parametrize("doc", [*YAML_DOCS, "docs/architecture.md"])
def test_links_stay_in_the_repo_and_exist(doc):
    text = _prose((ROOT / doc).read_text())
    targets = re.findall(r"\]\(([^)#\s]+)", text) + re.findall(r"`(\.\./[^`\s]+)`", text)
    bad = []
    for target in targets:
        if "://" in target or target.startswith("mailto:"):
            continue
        path = ((ROOT / doc).parent / target).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            bad.append(target)
    assert not bad, f"{doc} points at paths outside the repository or missing: {bad}"


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchors for a markdown file's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated anchor numbered -1, -2, ..."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", _prose(text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n, anchor = 0, slug
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def test_heading_anchors_follow_github():
    text = "# A `x` title\n\n## Teacher–student studies (`train.distill`)\n\n```\n# not a heading\n```\n## A `x` title\n"
    assert heading_anchors(text) == {"a-x-title", "teacherstudent-studies-traindistill", "a-x-title-1"}


MARKDOWN_DOCS = sorted({*YAML_DOCS, "docs/architecture.md", "infra/README.md"})


def missing_anchors(doc: Path) -> list[str]:
    """The `[x](other.md#section)` and `[x](#section)` links of `doc` whose heading does not exist."""
    bad = []
    for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", _prose(doc.read_text())):
        path = (doc.parent / target).resolve() if target else doc
        if path.suffix == ".md" and path.is_file() and anchor not in heading_anchors(path.read_text()):
            bad.append(f"{target}#{anchor}")
    return bad


@pytest.mark.parametrize("doc", MARKDOWN_DOCS)
def test_link_anchors_exist(doc):
    bad = missing_anchors(ROOT / doc)
    assert not bad, f"{doc} links to anchors its targets do not have: {bad}"


def test_a_broken_anchor_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## Its section\n")
    doc = tmp_path / "doc.md"
    doc.write_text("# Doc\n\n[a](#doc) [b](#gone) [c](other.md#its-section) [d](other.md#renamed)\n")
    assert missing_anchors(doc) == ["#gone", "other.md#renamed"]


PACKAGE = ROOT / "platform" / "vitscale"
SUBPACKAGES = "study|tune|train|bench|analysis|tracking|data|models|cli"


def _defines(module: Path, name: str) -> bool:
    text = module.read_text()
    pattern = (
        rf"^(?:async def|def|class) {name}\b|^{name}\s*[:=]|^from \S+ import [^\n]*\b{name}\b|^\s+{name},$"
    )
    return re.search(pattern, text, re.M) is not None


def _resolves(dotted: str) -> bool:
    """`bench.trial.bench_trial` -> platform/vitscale/bench/trial.py defines (or imports) bench_trial."""
    parts, base = dotted.split("."), PACKAGE
    while parts and (base / parts[0]).is_dir():
        base = base / parts.pop(0)
    module = base / "__init__.py"
    if parts and (base / f"{parts[0]}.py").is_file():
        module = base / f"{parts.pop(0)}.py"
    return module.is_file() and (not parts or (len(parts) == 1 and _defines(module, parts[0])))


def test_architecture_names_exist():
    """The modules, functions and files docs/architecture.md names are in the code today."""
    text = (ROOT / "docs/architecture.md").read_text()
    names = set(re.findall(rf"(?<![\w/.-])(?:{SUBPACKAGES})\.[a-z_]+(?:\.[a-z_]+)*", text))
    names = {n for n in names if n.rsplit(".", 1)[-1] not in {"py", "json", "yaml", "md"}}
    missing = sorted(n for n in names if not _resolves(n))
    files = set(re.findall(r"`([\w./-]+\.(?:py|yaml|md))`", text))
    everywhere = {p.name for folder in ("platform", "tests", "studies") for p in (ROOT / folder).rglob("*")}
    for name in files:
        if "/" in name:
            if not any((base / name).exists() for base in (ROOT, PACKAGE)):
                missing.append(name)
        elif name not in everywhere:
            missing.append(name)
    assert len(names) > 5 and len(files) > 5
    assert not missing, f"docs/architecture.md names what the code does not have: {missing}"


def test_architecture_layer_table_is_the_layering_contract():
    """docs/architecture.md's layer table lists exactly tests/test_layering.py's LAYERS, in order."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("layering_contract", ROOT / "tests" / "test_layering.py")
    layering = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layering)
    text = (ROOT / "docs/architecture.md").read_text()
    section = text[text.index("## Layers") :].split("\n## ")[0]
    table: dict[int, set[str]] = {}
    rank = None
    for line in section.split("\n"):
        match = re.match(r"    (\d| )  (.{26})", line)
        if not match or not match.group(2).strip():
            continue
        rank = int(match.group(1)) if match.group(1) != " " else rank
        names = {n.strip().removesuffix("/__init__") for n in match.group(2).split(",")}
        table.setdefault(rank, set()).update(n for n in names if n)
    contract = {i: set(names) for i, (names, _) in enumerate(layering.LAYERS)}
    assert table == contract, f"docs/architecture.md's layers differ from LAYERS:\n{table}\n{contract}"


def test_studies_table_lists_every_study_with_its_trial_count():
    """studies/README.md's table: one row per shipped study, trials as `vitscale study validate` counts them."""
    rows = re.findall(
        r"^\| ([\w.]+\.yaml(?:, [\w.]+\.yaml)*) \| .* \| (\d+)(?: each)? \|$",
        (ROOT / STUDIES_README).read_text(),
        re.M,
    )
    table = {name: int(n) for names, n in rows for name in names.split(", ")}
    shipped = {p.name for p in (ROOT / "studies").glob("*.yaml")}
    assert set(table) == shipped, (
        f"studies/README.md's table: missing {sorted(shipped - set(table))}, extra {sorted(set(table) - shipped)}"
    )
    counted = {name: count_trials(load_study(ROOT / "studies" / name)) for name in table}
    wrong = {name: (n, counted[name]) for name, n in table.items() if counted[name] != n}
    assert not wrong, f"studies/README.md: trials in the table vs counted: {wrong}"
