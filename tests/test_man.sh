#!/bin/sh
# The man page's COMMANDS section must match every command's --help (regenerate it with
# `python3 tools/gen-man-commands.py`), and the page must format without groff warnings.
cd "$(dirname "$0")/.." || exit 1
bin=${BUILD:-build}/multidecode
p=0; f=0; s=0
if ! command -v python3 >/dev/null 2>&1 || [ ! -x "$bin" ]; then
    if [ -n "$MD_REQUIRE_FIXTURES" ] && [ "$MD_REQUIRE_FIXTURES" != 0 ]; then
        echo "FAIL: python3 or $bin missing (MD_REQUIRE_FIXTURES)" >&2; f=1
    else echo "SKIP: python3 or $bin missing" >&2; s=1; fi
else
    if python3 tools/gen-man-commands.py --check "$bin"; then p=$((p + 1)); else f=$((f + 1)); fi
fi
# the forest pane's marks (forest_view.c's legend, UTF-8 glyphs) are the ones the page names
if command -v python3 >/dev/null 2>&1; then
    if python3 - <<'PY'
import re, sys
src = open("ui/forest_view.c", encoding="utf-8").read()
legend = src[src.index("fv_legend("):]
legend = legend[:legend.index("static const char *const a[]")]
glyphs = set()
for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', legend):
    text = bytes(lit, "ascii").decode("unicode_escape").encode("latin-1").decode("utf-8")
    glyphs |= {c for c in text if ord(c) > 127}
page = open("man/multidecode.1", encoding="utf-8").read()
missing = sorted(c for c in glyphs if "\\[u%04X]" % ord(c) not in page)
if missing:
    print("FAIL: marks the screen draws but the man page does not name: " + " ".join(missing), file=sys.stderr)
    sys.exit(1)
PY
    then p=$((p + 1)); else f=$((f + 1)); fi
fi
if command -v groff >/dev/null 2>&1; then
    warn=$(groff -man -Tutf8 -ww man/multidecode.1 2>&1 >/dev/null)
    if [ -z "$warn" ]; then p=$((p + 1)); else echo "FAIL: groff warnings: $warn" >&2; f=$((f + 1)); fi
else
    echo "SKIP: groff missing" >&2
    s=$((s + 1))
fi
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
