"""``memstream doctor --stale``: a project's memories whose cited code changed, moved or is gone (issue 39).

The memories come from the running memstream (``GET /memories?project=…``, the records ``get`` shows,
citations included); their citations are checked here, against this machine's work trees, with git
(:mod:`memstream.recall.staleness`), so a remote memstream never reads the user's disk.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memstream.commands.read import api_get
from memstream.recall.staleness import Checker, check_record, describe
from memstream.settings import Settings

#: The most memories ``doctor --stale`` reads (the API's own cap on a project listing).
STALE_SCAN_LIMIT = 1000
#: The order the report lists them: the staler first.
ORDER = {"gone": 0, "changed": 1, "moved": 2}


def cmd_stale(args: argparse.Namespace, settings: Settings) -> int:
    project = str(Path(args.project or ".").resolve())
    _, body = api_get(settings, "/memories", {"project": project, "limit": str(STALE_SCAN_LIMIT), "detail": "full"})
    records = json.loads(body)["memories"]
    checker = Checker()
    stale = []
    for record in records:
        status, checked = check_record(record, checker)
        if status in ORDER:
            stale.append((status, record, checked))
    stale.sort(key=lambda item: ORDER[item[0]])
    if args.json:
        report = [
            {"id": r["id"], "status": s, "citations": [{"path": c.citation.path, "note": c.note} for c in cs]}
            for s, r, cs in stale
        ]
        print(json.dumps(report))
        return 0
    cited = sum(1 for record in records if record.get("citations"))
    print(f"{len(stale)} stale of {cited} memories citing code ({len(records)} read) in {project}")
    for status, record, checked in stale:
        text = " ".join(str(record["text"]).split())
        print(f"{status:8} {record['id']}  {text[:90]}{'…' if len(text) > 90 else ''}")
        for one in checked:
            if one.status != "current":
                print(f"         {describe(one)}")
    if stale:
        print("correct one with `memstream forget ID` or the console's memory page")
    return 0
