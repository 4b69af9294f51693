"""What tests/dashboard.sh reads from the dashboard page that headless Chromium dumped
(--dump-dom): each chart's plotted points and series, each run row's state, the page's
error log and how many refreshes it completed.

    python3 tests/dashboard_dom.py DOM.html              prints the facts as JSON
    python3 tests/dashboard_dom.py DOM.html KEY.PATH     prints one fact (charts.loss.points)
"""
import json
import sys
from html.parser import HTMLParser


class Facts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.facts = {"charts": {}, "runs": {}, "errors": None, "error_text": "", "refreshes": None}
        self._in_errors = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "canvas" and a.get("id", "").startswith("chart-"):
            self.facts["charts"][a["id"][6:]] = {"points": int(a["data-points"]), "series": int(a["data-series"])}
        elif tag == "tr" and "data-run" in a:
            self.facts["runs"][a["data-run"]] = {"state": a["data-state"], "records": int(a["data-records"]),
                                                 "malformed": int(a["data-malformed"])}
        elif a.get("id") == "page-errors":
            self.facts["errors"] = int(a["data-count"])
            self._in_errors = True
        elif a.get("id") == "charts":
            self.facts["refreshes"] = int(a["data-refreshes"])

    def handle_endtag(self, tag):
        if tag == "pre":
            self._in_errors = False

    def handle_data(self, data):
        if self._in_errors:
            self.facts["error_text"] += data


def main():
    p = Facts()
    with open(sys.argv[1], encoding="utf-8") as f:
        p.feed(f.read())
    facts = p.facts
    if len(sys.argv) > 2:
        for key in sys.argv[2].split("."):
            facts = facts[key] if isinstance(facts, dict) and key in facts else None
        print(json.dumps(facts) if isinstance(facts, (dict, list)) else ("" if facts is None else facts))
    else:
        print(json.dumps(facts, indent=1))


if __name__ == "__main__":
    main()
