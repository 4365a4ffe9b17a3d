"""The HTML report's stylesheet: inline, allowed by its hash in the page's
Content-Security-Policy, which forbids everything else (no script, no image, no request).

Bars are placed by classes (`l123`: left at 12.3 %, `w45`: 4.5 % wide) whose rules the page
adds for the positions it uses, since the policy forbids `style` attributes too.
"""

from __future__ import annotations

BASE = """
:root{--ok:#2e7d32;--back:#ef8f00;--bad:#c62828;--int:#6a1b9a;--run:#1565c0;
--wait:#cfd8dc;--queue:#eceff1;--line:#e0e0e0;--muted:#616161;color-scheme:light}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;
max-width:1400px;padding:16px 24px;color:#212121;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;
border-bottom:1px solid var(--line);padding-bottom:4px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
pre{background:#f5f5f5;border:1px solid var(--line);padding:8px;overflow:auto;
max-height:24em;white-space:pre-wrap;word-break:break-all}
table{border-collapse:collapse;width:100%;margin:4px 0}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#fafafa;font-weight:600}td.n,th.n{text-align:right;
font-variant-numeric:tabular-nums}
.muted{color:var(--muted)}
.status{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-weight:600}
.st-COMPLETED{background:var(--ok)}.st-FAILED{background:var(--bad)}
.st-RUNNING{background:var(--run)}.st-PAUSED,.st-STOPPED{background:#757575}
.counts span{margin-right:14px}
.note{background:#fff8e1;border-left:4px solid var(--back);padding:6px 10px;margin:8px 0}
details{margin:4px 0}summary{cursor:pointer;font-weight:600;padding:2px 0}
.legend i{display:inline-block;width:18px;height:10px;margin:0 4px 0 12px;
vertical-align:middle;position:static}
.tl{position:relative;margin:4px 0}
.lane{position:absolute;top:0;bottom:0;left:16em;right:0;pointer-events:none}
.gap{position:absolute;top:0;bottom:0;background:repeating-linear-gradient(
45deg,#fff,#fff 4px,#ffcdd2 4px,#ffcdd2 8px);opacity:.7}
.axis{display:flex;margin-left:16em;position:relative;height:18px;
font-size:11px;color:var(--muted)}
.axis span{position:absolute;transform:translateX(-50%);white-space:nowrap}
.axis span:first-child{transform:none}.axis span:last-child{transform:translateX(-100%)}
.row{display:flex;align-items:center;height:20px;border-bottom:1px solid #f3f3f3}
.row:hover{background:#fafafa}
.name{width:16em;flex:none;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
padding-right:8px;font-family:ui-monospace,monospace;font-size:12px}
.track{position:relative;flex:1;height:100%}
.track i,.track b,.lane i{position:absolute;display:block}
.track i{top:5px;height:10px;min-width:2px;border-radius:2px}
.k-waiting{background:var(--wait)}.k-queued{background:var(--queue);
border:1px dashed #b0bec5}.k-preparing{background:#90a4ae}
.k-committing,.k-verifying{top:7px!important;height:6px!important;opacity:.75}
.k-verifying{outline:1px solid #fff}
.k-merge_queue{top:8px!important;height:4px!important;background:#9e9e9e}
.k-integration{top:8px!important;height:4px!important;background:var(--int)}
.o-accepted{background:var(--ok)}.o-sent_back{background:var(--back)}
.o-failed,.o-conflicted{background:var(--bad)}.o-interrupted,.o-stopped,
.o-skipped{background:#9e9e9e}.o-running{background:var(--run)}
.o-paused{background:#90caf9}.o-merged.k-merge_queue{background:#9e9e9e}
.track b{top:2px;width:4px;height:16px;margin-left:-2px;border-radius:1px}
.m-merged{background:#1b5e20}.m-conflicted,.m-failed{background:var(--bad)}
.m-skipped,.m-stopped{background:#424242}
.meter{display:inline-block;width:120px;height:8px;background:#eee;position:relative;
vertical-align:middle;margin-left:6px}.meter i{position:absolute;top:0;bottom:0;left:0;
background:var(--run)}.meter.over i{background:var(--bad)}
.ev td{padding:1px 8px;font-size:12px}
.resolution h3{font-size:15px;margin:14px 0 4px}.outcome{padding:0 8px;border-radius:8px;
color:#fff}.o-refused{background:var(--bad)}
"""


def position_rules(lefts: set[int], widths: set[int]) -> str:
    """The rules for the positions a page uses, in tenths of a percent."""
    rules = [f".l{n}{{left:{n / 10:g}%}}" for n in sorted(lefts)]
    rules += [f".w{n}{{width:{n / 10:g}%}}" for n in sorted(widths)]
    return "\n".join(rules)
