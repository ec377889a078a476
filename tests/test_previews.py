"""Previews of the data files a prompt names, in the kernel context the model gets."""

from __future__ import annotations

import json
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

from jupyter_ci.kernel.context import collect_context
from jupyter_ci.kernel.previews import PREVIEW_CHARS, previews_section
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import error_of, openai_env, run_cells

TITLE = "## Data files the prompt names"
KEY = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"


def section(text: str) -> str:
    """Give the previews section of a context, or ''."""
    if TITLE not in text:
        return ""
    return text.split(TITLE, 1)[1].split("\n## ", 1)[0]


def data_files(folder: Path) -> None:
    """Write a CSV, a JSON array of records, an unnamed CSV, a large CSV and a broken JSON."""
    (folder / "sales.csv").write_text(
        "region,revenue,month\n" + "".join(f"R{i},{i * 1.5},{i % 12 + 1}\n" for i in range(40)))
    people = [{"name": f"p{i}", "age": 20 + i, "city": "Oslo"} for i in range(12)]
    (folder / "people.json").write_text(json.dumps(people))
    (folder / "other.csv").write_text("secret_plan,x\nunseen,1\n")
    with open(folder / "big.csv", "wb") as f:
        f.write(b"a,b\n1,2\n")
        f.truncate(60 * 1024 * 1024)  # sparse: large on paper, free to write
    (folder / "broken.json").write_text("{not json")


def test_named_csv_and_json_are_previewed_and_other_files_are_not(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    data_files(tmp_path)
    prompt = "Plot revenue by month from sales.csv, and who in `people.json` lives where?"
    previews = section(collect_context(shell, 3_000, cwd=str(tmp_path), prompt=prompt))
    assert "sales.csv (CSV, " in previews
    assert "columns (3): region (" in previews and "revenue (float64), month (int64)" in previews
    assert "first 5 rows:" in previews and "R4" in previews and "R5" not in previews
    assert 'people.json (JSON, ' in previews and "12 records" in previews
    assert "name (" in previews and "age (int64)" in previews and "p4" in previews
    assert "other.csv" not in previews and "unseen" not in previews
    # Without a named file there is no section at all.
    assert TITLE not in collect_context(shell, 3_000, cwd=str(tmp_path), prompt="plot it")


def test_a_large_file_is_skipped_and_a_broken_one_says_it_could_not_be_previewed(
    tmp_path: Path
) -> None:
    data_files(tmp_path)
    previews = previews_section("compare big.csv with broken.json", str(tmp_path))
    assert "big.csv (CSV, 60.0 MB): not previewed, over the 50 MB preview limit" in previews
    assert "broken.json (JSON, 9 B): could not preview: JSONDecodeError: Expecting" in previews


def test_files_are_found_in_a_subfolder_by_name_and_by_path(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "jan.csv").write_text("day,amount\n1,10\n")
    (tmp_path / "data" / "feb.tsv").write_text("day\tamount\n1\t20\n")
    (tmp_path / "data" / "events.jsonl").write_text('{"kind": "a", "n": 1}\n{"kind": "b"}\n')
    previews = previews_section("Sum jan.csv, data/feb.tsv and data/events.jsonl.",
                                str(tmp_path))
    assert "jan.csv (CSV, " in previews and "amount (int64)" in previews
    assert "data/feb.tsv (TSV, " in previews and "  20" in previews
    assert "data/events.jsonl (JSON lines, " in previews and "n (float64)" in previews


def test_a_preview_is_capped_and_secrets_in_it_are_redacted(tmp_path: Path) -> None:
    header = ",".join(f"column_{i}" for i in range(300)) + ",api_key,note\n"
    row = ",".join(str(i) for i in range(300)) + f",hunter2,key {KEY}\n"
    (tmp_path / "wide.csv").write_text(header + row * 8)
    previews = previews_section("look at wide.csv", str(tmp_path))
    assert len(previews) <= PREVIEW_CHARS and "… 272 more" in previews
    assert "hunter2" not in previews and KEY not in previews


def test_the_model_gets_the_previews_in_its_request(fake: FakeLLM, tmp_path: Path) -> None:
    data_files(tmp_path)
    fake.push(Turn("R39 has the most revenue."))
    nb = run_cells(["%%ask\nWhich region in sales.csv has the most revenue? Compare with "
                    "people.json, big.csv and broken.json."], openai_env(fake), tmp_path)
    assert error_of(nb.cells[1]) is None
    sent = fake.requests[0].messages[-1]["content"]
    previews = section(sent)
    assert "sales.csv (CSV, " in previews and "revenue (float64)" in previews
    assert "R0" in previews and "people.json (JSON, " in previews and "p0" in previews
    assert "big.csv (CSV, 60.0 MB): not previewed" in previews
    assert "broken.json (JSON, 9 B): could not preview" in previews
    assert "other.csv" not in previews and "unseen" not in sent
