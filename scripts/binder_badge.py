"""Write README.md's Binder badge from this repository's `origin` remote (no placeholder to edit).

    python scripts/binder_badge.py            # from `git remote get-url origin`
    python scripts/binder_badge.py --remote https://github.com/me/jupyter-ci

The badge opens examples/getting-started.ipynb in JupyterLab on mybinder.org. It is written
between the README's `<!-- binder-badge` and `<!-- /binder-badge -->` lines; without a remote,
nothing is changed and the script says so.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
URLPATH = "lab/tree/examples/getting-started.ipynb"
BLOCK = re.compile(r"(<!-- binder-badge[^\n]*-->\n).*?(<!-- /binder-badge -->)", re.DOTALL)
# https://host/owner/repo(.git), ssh://git@host/owner/repo.git, git@host:owner/repo.git
_REMOTE = re.compile(r"^(?:[a-z+]+://(?:[^@/]+@)?|[^@/]+@)(?P<host>[^/:]+)(?::\d+)?[:/]"
                     r"(?P<path>.+?)(?:\.git)?/?$")


def binder_url(remote: str) -> str:
    """Return the mybinder.org URL that builds `remote` and opens the example notebook."""
    found = _REMOTE.match(remote.strip())
    if found is None:
        raise ValueError(f"not a git remote URL: {remote!r}")
    host, path = found["host"].lower(), found["path"]
    if host == "github.com":
        spec = f"gh/{path}/HEAD"
    elif host == "gitlab.com":
        spec = f"gl/{quote(path, safe='')}/HEAD"
    else:  # any public git server, by its https URL
        spec = f"git/{quote(f'https://{host}/{path}.git', safe='')}/HEAD"
    return f"https://mybinder.org/v2/{spec}?urlpath={URLPATH}"


def badge(remote: str) -> str:
    """Return the Markdown of the badge."""
    return f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder_url(remote)})"


def origin(root: Path) -> str | None:
    """Return the `origin` remote's URL, or None when there is none."""
    done = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def write(readme: Path, remote: str) -> None:
    """Put the badge between the README's binder-badge markers."""
    text = readme.read_text()
    if not BLOCK.search(text):
        raise SystemExit(f"{readme} has no <!-- binder-badge --> markers to write between")
    readme.write_text(BLOCK.sub(lambda m: f"{m[1]}{badge(remote)}\n{m[2]}", text, count=1))


def main(argv: list[str] | None = None) -> int:
    """Write the badge; return 1 (changing nothing) when no remote is known."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remote", help="the repository's URL (default: git's origin)")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    args = parser.parse_args(argv)
    remote = args.remote or origin(args.readme.parent)
    if not remote:
        print("No `origin` remote (git remote add origin <url>, or pass --remote): the README "
              "keeps no badge.", file=sys.stderr)
        return 1
    try:
        write(args.readme, remote)
    except ValueError:
        # A clone of a clone on this machine (`git clone /path/to/jupyter-ci`), or the like.
        print(f"`origin` is {remote!r}, not a public git server's URL, and Binder builds only "
              "those: pass the repository's public URL (--remote "
              "https://github.com/<owner>/<repo>). The README keeps no badge.", file=sys.stderr)
        return 1
    print(f"{args.readme}: Binder badge for {remote}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
