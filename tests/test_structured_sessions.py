"""Structured results in REST sessions: an execute's outputs carry charts and tables as data."""

from __future__ import annotations

import base64
import io

from PIL import Image

from tests.test_sessions import (  # noqa: F401  (the fixtures of a test server)
    Fetch,
    ci_config,
    jp_server_config,
    more_config,
    new_session,
    run,
)
from tests.test_structured import CHART, FIGURE, TABLE, check_figure


async def test_a_sessions_results_carry_chart_and_table_data_and_show_images(
        jp_fetch: Fetch) -> None:
    session = await new_session(jp_fetch)
    sid = session["id"]
    figure = await run(jp_fetch, sid, FIGURE)
    [shown] = [o["data"] for o in figure["outputs"] if o["output_type"] == "display_data"]
    assert "image/png" in shown
    check_figure(shown[CHART])
    frame = await run(jp_fetch, sid, "import pandas as pd\n"
                                     "pd.DataFrame({'n': range(3000), 'sq': [i * i for i in "
                                     "range(3000)]})")
    table = frame["outputs"][0]["data"][TABLE]
    assert [f["name"] for f in table["schema"]["fields"]] == ["index", "n", "sq"]
    assert table["data"][3] == {"index": 3, "n": 3, "sq": 9}
    assert len(table["data"]) == 1000 and table["total_rows"] == 3000 and table["truncated"]
    image = await run(jp_fetch, sid, "from PIL import Image\n"
                                     "Image.new('RGB', (5, 4), 'blue').show()")
    [png] = [o["data"]["image/png"] for o in image["outputs"]]
    assert Image.open(io.BytesIO(base64.b64decode(png))).size == (5, 4)
    # Installed quietly: no name in the session's namespace, no history of its own.
    names = await run(jp_fetch, sid, "'install' in dir(), len(In)")
    assert names["outputs"][0]["data"]["text/plain"] == "(False, 5)"
