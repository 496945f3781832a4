"""Where the project's shared inputs are: ``../shared/<kind>`` (``models``: the published
TFLite models, ``seeds``: the source documents) next to the repository, next to the main
checkout when this is a git worktree, or next to a folder above it; ``$NPU_SHARED_MODELS``
names the models folder directly (and its sibling folders the other kinds)."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = "NPU_SHARED_MODELS"


def main_checkout(repo: Path) -> "Path | None":
    """The main checkout's root when *repo* is a git worktree (.git is a file
    'gitdir: <main>/.git/worktrees/<name>' whose commondir leads to <main>/.git)."""
    git = repo / ".git"
    if not git.is_file():
        return None
    try:
        gitdir = Path(git.read_text().split("gitdir:", 1)[1].strip())
        common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
    except (OSError, IndexError):
        return None
    return common.parent


def shared_dir(kind: str = "models", repo: Path = REPO) -> "Path | None":
    """``../shared/<kind>`` (module doc), or None when there is none."""
    if os.environ.get(ENV):
        env = Path(os.environ[ENV])
        return env if kind == "models" else env.parent / kind
    roots = [repo, main_checkout(repo), *repo.parents]
    for root in roots:
        if root is not None and (root.parent / "shared" / kind).is_dir():
            return root.parent / "shared" / kind
    return None
