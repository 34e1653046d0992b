"""The probe agent's zipapp runs on the host's Python >= 3.9 (`MIN_PYTHON`): checked statically (vermin, the
3.9 grammar, ruff held to 3.9 on the same files) and for real, by importing and running the built zipapp
with the machine image's pyenv 3.9 and 3.10; 3.8 gets one line and the too-old exit status.
"""

from __future__ import annotations

import ast
import subprocess
import tomllib
from pathlib import Path

import pytest
import vermin

from specdash.bench.agent.bundle import MODULES, TOO_OLD_EXIT, build
from specdash.bench.agent.wire import MIN_PYTHON, PROTOCOL
from tests.support import pythons

ROOT = Path(__file__).resolve().parents[2]
NEED = ".".join(map(str, MIN_PYTHON))


def test_the_agent_needs_python_3_9() -> None:
    assert MIN_PYTHON == (3, 9)


@pytest.mark.parametrize("rel", MODULES)
def test_every_shipped_module_is_in_the_3_9_grammar(rel: str) -> None:
    ast.parse((ROOT / rel).read_text(), filename=rel, feature_version=MIN_PYTHON)


@pytest.mark.parametrize("rel", MODULES)
def test_annotations_in_shipped_modules_are_never_evaluated(rel: str) -> None:
    """`X | None` and `list[int]` in annotations are fine on 3.9 only as strings (PEP 563)."""
    tree = ast.parse((ROOT / rel).read_text())
    annotated = any(
        isinstance(node, ast.AnnAssign) or (isinstance(node, ast.arg) and node.annotation is not None)
        or (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None)
        for node in ast.walk(tree)
    )  # fmt: skip
    futures = {a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__" for a in n.names}
    assert not annotated or "annotations" in futures, (
        f"{rel} has annotations without `from __future__ import annotations`"
    )


_TYPES = {"int", "float", "str", "bytes", "bool", "list", "dict", "tuple", "set", "frozenset", "type", "object"}


def _runtime_unions(tree: ast.AST) -> list[int]:
    """Lines of `A | B` between types outside annotations (`isinstance(x, int | float)`, an alias): 3.10."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        notes = [getattr(node, "annotation", None), getattr(node, "returns", None)]
        for note in notes:
            if note is not None:
                skip.update(id(n) for n in ast.walk(note))

    def is_type(e: ast.expr) -> bool:
        return (
            (isinstance(e, ast.Constant) and e.value is None)
            or (isinstance(e, ast.Name) and e.id in _TYPES)
            or (isinstance(e, ast.Subscript))
        )

    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and id(node) not in skip
        and (is_type(node.left) or is_type(node.right))
    )  # fmt: skip


@pytest.mark.parametrize("rel", MODULES)
def test_no_union_of_types_is_evaluated_in_a_shipped_module(rel: str) -> None:
    """vermin's own check of this is a heuristic that also counts annotations (strings here): ours skips them."""
    assert _runtime_unions(ast.parse((ROOT / rel).read_text())) == [], f"{rel}: use a tuple or Optional there"


def test_the_union_check_sees_what_3_9_cannot_run() -> None:
    bad = "isinstance(x, int | float)\nAlias = tuple[int | None, str]\ny = None | int\n"
    fine = "def f(a: int | None) -> list[int] | None: ...\nb: int | None = 1 | 2\nflags = A | B\n"
    assert _runtime_unions(ast.parse(bad)) == [1, 2, 3]
    assert _runtime_unions(ast.parse(fine)) == []


@pytest.mark.parametrize("rel", MODULES)
def test_vermin_finds_nothing_in_a_shipped_module_newer_than_3_9(rel: str) -> None:
    """vermin knows which stdlib names, arguments and syntax came in which version (`zip(strict=)`,
    `enum.StrEnum`, `asyncio.timeout`, `dataclass(slots=)`...)."""
    _, py3 = vermin.detect((ROOT / rel).read_text(), vermin.Config(), rel)
    assert py3 is not None and py3 <= MIN_PYTHON, f"{rel} needs Python {py3}: see `vermin -vv --no-tips {rel}`"


def test_ruff_holds_the_shipped_modules_to_3_9() -> None:
    """pyproject's per-file target version lists exactly the shipped modules (ruff then flags newer syntax and
    never suggests a newer idiom there)."""
    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    per_file = ruff["per-file-target-version"]
    assert set(per_file) == set(MODULES)
    assert set(per_file.values()) == {"py" + "".join(map(str, MIN_PYTHON))}


@pytest.fixture(scope="module")
def pyz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("agent") / build().name
    path.write_bytes(build().data)
    return path


# Imports every shipped module from the zipapp and exercises what differs across versions: the StrEnum
# stand-in, a slots-less sample's round trip through the wire format, SSE accounting, the compat `uncancel`.
_EXERCISE = r"""
import asyncio, importlib, json, sys
sys.path.insert(0, sys.argv[1])
for m in sys.argv[2:]:
    importlib.import_module(m)
from specdash.bench.samples import Failure, RequestSample
from specdash.bench.sse import Endpoint
from specdash.bench.agent.wire import sample_from_list, sample_to_list
from specdash.bench import compat
assert str(Failure.STALL) == "stall" == f"{Failure.STALL}" and Failure("stall") is Failure.STALL
assert Endpoint("chat").path == "/v1/chat/completions" and Endpoint.CHAT == "chat"
s = RequestSample(index=1, prompt_index=0, worker=0, error=Failure.STALL, detail="d", http_status=200,
                  scheduled_ns=1, start_ns=2, end_ns=3, first_token_ns=None, last_token_ns=None, output_tokens=0,
                  requested_tokens=4, estimated=False, per_chunk_exact=True, chunk_offsets_us=(1, 2),
                  chunk_tokens=(1, 1))
back = sample_from_list(json.loads(json.dumps(sample_to_list(s))), 10)
assert back.error is Failure.STALL and back.start_ns == 12 and back.credits() == [(1012, 1), (2012, 1)], back
from specdash.bench.sse import StreamAccount
from specdash.safetext import escape_controls_in
a = StreamAccount(Endpoint.GENERATE, 2)
a.feed(b'data: {"text":"a","meta_info":{"completion_tokens":1}}\n\n', 1)
a.feed(b'data: {"text":"ab","meta_info":{"completion_tokens":2,"spec_accept_length":1.5}}\n\ndata: [DONE]\n\n', 2)
assert a.finish() == (2, False) and a.spec_accept_length == 1.5 and a.times == [1, 2] and a.done_ns == 2
assert escape_controls_in({"k": ["v", 1, {"n": None}]}) == {"k": ["v", 1, {"n": None}]}
async def main():
    task = asyncio.ensure_future(asyncio.sleep(10))
    await asyncio.sleep(0)
    task.cancel()
    return compat.uncancel(task)
print("ok", sys.version_info[:2], asyncio.run(main()))
"""


@pytest.mark.parametrize("minor", [9, 10])
def test_the_zipapp_runs_on_python_3_minor(pyz: Path, minor: int) -> None:
    home = pythons.find(3, minor)
    if home is None:
        pytest.skip(pythons.skip_reason(3, minor))
    python = str(home / "bin" / f"python3.{minor}")
    modules = [m[:-3].replace("/", ".").removesuffix(".__init__") for m in MODULES]
    out = subprocess.run([python, "-I", "-c", _EXERCISE, str(pyz), *modules], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == f"ok (3, {minor}) 0"  # uncancel: 0 pending once ours is taken back
    refused = subprocess.run([python, "-I", str(pyz), "--expect", "0.0.0+0"], capture_output=True, text=True,
                             timeout=60)  # fmt: skip
    assert refused.returncode == 2 and PROTOCOL in refused.stdout and "0.0.0+0" in refused.stdout


def test_python_3_8_is_told_in_one_line(pyz: Path) -> None:
    home = pythons.find(3, 8)
    if home is None:
        pytest.skip(pythons.skip_reason(3, 8))
    out = subprocess.run([str(home / "bin" / "python3.8"), "-I", str(pyz), "--expect", PROTOCOL],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == TOO_OLD_EXIT
    assert out.stderr == f"specdash agent needs Python >= {NEED}, this is 3.8\n" and out.stdout == ""
