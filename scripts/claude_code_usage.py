"""memdiag's recount of a Claude Code session's requests beside the provider's `message.usage`
(docs/coding-agents.md, "What the recount leaves out").

    python scripts/claude_code_usage.py SESSION.jsonl [SESSION.jsonl ...]

For each session: every observed request the reader keeps (line, recount, reported, gap), then
the growth ratio: over consecutive requests of the same model whose sizes both grew, the
provider's growth divided by the recount's (the reader is made to keep every request for it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memdiag.strategies.observed import call_tokens  # noqa: E402
from memdiag.tokens import TokenCounter  # noqa: E402
from memdiag.transcript import load  # noqa: E402
from memdiag.transcript.formats import claude_code  # noqa: E402


def main(paths: list[str]) -> None:
    counter = TokenCounter("o200k_base")
    for path in paths:
        t = load(path, "claude_code")
        calls = {c.before: c for c in call_tokens(t, counter)}
        print(f"{Path(path).name}: {len(t.turns)} turns")
        for w in t.windows:
            c = calls[w.before_id]
            where = " (after a compaction)" if w.source else ""
            print(
                f"  line {w.line:5}  recount {c.recounted:7}  reported {c.reported}  "
                f"gap {c.difference}{where}"
            )
        kept = claude_code.kept_requests
        claude_code.kept_requests = lambda reqs, before_compaction=False: [w for *_, w in reqs]
        try:
            every = load(path, "claude_code")
        finally:
            claude_code.kept_requests = kept
        lines = [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines()]
        grew = [0, 0]
        prev = None
        for c, w in zip(call_tokens(every, counter), every.windows, strict=True):
            model = lines[w.line - 1]["message"].get("model")
            if prev and prev[2] == model and c.reported is not None and prev[0] is not None:
                up, rec = c.reported - prev[0], c.recounted - prev[1]
                if up > 0 and rec > 0:
                    grew[0] += up
                    grew[1] += rec
            prev = (c.reported, c.recounted, model)
        if grew[1]:
            print(
                f"  growth: reported +{grew[0]}, recount +{grew[1]}, "
                f"ratio {grew[0] / grew[1]:.2f} over {len(every.windows)} requests"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
