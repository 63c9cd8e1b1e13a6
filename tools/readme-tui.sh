#!/bin/sh
# readme-tui.sh - README.md's TUI example, made from a screen the tmux test captured
# (tests/test_tui_tmux.sh: stories260K, 100x30, `:set temp 0`, `:grow 8`, `:cot 4 6`, `v`),
# so that the example cannot drift from what the program shows. The block is the fenced
# one after the line "<!-- tui-example ... -->" in README.md; the pane's empty rows at
# the bottom (above the status line, the message and the key bar) become one "   ..." line.
#   tools/readme-tui.sh SCREEN          writes the block into README.md
#   tools/readme-tui.sh --check SCREEN  exits 1 (with a diff) when README.md differs
# The test runs --check on every run and writes the block with UPDATE_GOLDEN=1.
cd "$(dirname "$0")/.." || exit 1
check=""
if [ "$1" = "--check" ]; then check=1; shift; fi
screen=$1
if [ ! -f "$screen" ]; then echo "usage: tools/readme-tui.sh [--check] SCREEN" >&2; exit 2; fi
grep -q '^<!-- tui-example' README.md || { echo "README.md has no <!-- tui-example --> line" >&2; exit 2; }
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.block"' EXIT
# the screen: title, pane rows up to the last one with text, "...", status, message, key bar
awk '{ l[NR] = $0 } END {
    last = NR - 3
    while (last > 1 && l[last] ~ /^ *│ *$/) last--
    for (i = 1; i <= last; i++) print l[i]
    if (last < NR - 3) print "   ..."
    print l[NR - 2]; print l[NR - 1]; print l[NR]
}' "$screen" > "$tmp.block"
awk -v block="$tmp.block" '
    skip && /^```$/ { skip = 0; print; next }
    skip { next }
    mark && /^```$/ { print; while ((getline b < block) > 0) print b; skip = 1; mark = 0; next }
    /^<!-- tui-example/ { mark = 1 }
    { print }' README.md > "$tmp"
if [ -n "$check" ]; then
    if cmp -s "$tmp" README.md; then exit 0; fi
    echo "README.md's TUI example differs from the screen (tools/readme-tui.sh $screen rewrites it):"
    diff README.md "$tmp" | head -20
    exit 1
fi
cp "$tmp" README.md
