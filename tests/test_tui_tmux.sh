#!/bin/sh
# test_tui_tmux.sh - the TUI driven by scripted keys in a detached tmux session: each
# screen is captured and compared with tests/golden/tui/NAME.txt after masking the
# status line's timing figures and thread count. Greedy decoding (:set temp 0) on the
# tiny stories260K model makes the screens deterministic. Also checks that quitting
# restores the terminal (alternate screen off, the shell's line visible), that the
# autosave was written, and the "too small" message at 60x20. Skips without tmux or the
# shared model. UPDATE_GOLDEN=1 rewrites the golden files. Ends with the usual
# "N passed, N failed, N skipped" line.
cd "$(dirname "$0")/.." || exit 1
P=0; F=0; S=0
MODEL=${MD_SHARED:-../shared}/models/stories260K.gguf
BIN=$(pwd)/${BUILD:-build}/multidecode
GOLD=tests/golden/tui
done_() { echo "$P passed, $F failed, $S skipped"; [ "$F" -eq 0 ]; exit $?; }
if ! command -v tmux >/dev/null 2>&1; then echo "SKIP: no tmux"; S=1; done_; fi
if [ ! -f "$MODEL" ] || [ ! -x "$BIN" ]; then echo "SKIP: no $MODEL or $BIN"; S=1; done_; fi

TMP=$(mktemp -d)
SOCK="md-tui-test-$$"
T() { tmux -L "$SOCK" "$@"; }
cleanup() { T kill-server 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
check() { # check NAME CONDITION-RESULT MESSAGE
    if [ "$2" = 0 ]; then P=$((P + 1)); else F=$((F + 1)); echo "FAIL: $1: $3"; fi
}
capture() { T capture-pane -p -t md | sed -E 's/( [0-9]+ rows) .*$/\1 #/; s/[0-9]+ thr/# thr/g; s/[ ]+$//'; }
# waits until the engine is idle and the screen stops changing (at most ~10 s)
settle() {
    prev=""; i=0
    while [ $i -lt 100 ]; do
        sleep 0.1
        cur=$(capture)
        if [ "$cur" = "$prev" ] && ! printf '%s' "$cur" | grep -q '| \(grow\|cot\|beam\|step\) '; then return 0; fi
        prev=$cur; i=$((i + 1))
    done
}
screen() { # screen NAME: compare the settled screen with its golden file
    settle
    capture > "$TMP/$1.txt"
    if [ -n "$UPDATE_GOLDEN" ]; then cp "$TMP/$1.txt" "$GOLD/$1.txt"; fi
    if cmp -s "$TMP/$1.txt" "$GOLD/$1.txt"; then check "$1" 0; else
        check "$1" 1 "screen differs from $GOLD/$1.txt"; diff "$GOLD/$1.txt" "$TMP/$1.txt" | head -20; fi
}

mkdir -p "$TMP/state" "$TMP/config"
T new-session -d -s md -x 100 -y 30 \
  "env TERM=xterm-256color LANG=C.UTF-8 LC_ALL=C.UTF-8 XDG_STATE_HOME=$TMP/state XDG_CONFIG_HOME=$TMP/config \
   $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
sleep 0.5
T send-keys -t md ':set temp 0' Enter
screen start
T send-keys -t md '?'
screen help
T send-keys -t md Escape
T send-keys -t md ':grow 8' Enter
screen grow8
T send-keys -t md ':cot 4 6' Enter
screen cot4
T send-keys -t md v
screen mask
T send-keys -t md v j j d
screen prune
T resize-window -t md -x 200 -y 60 2>/dev/null
screen big
T resize-window -t md -x 60 -y 20 2>/dev/null
settle
capture | grep -q 'terminal too small: 60x20, need 80x24'; check too-small $? "no 'too small' message at 60x20"
T resize-window -t md -x 100 -y 30 2>/dev/null
settle
T send-keys -t md q
sleep 1
capture | grep -q 'EXITED rc=0'; check quit $? "the program did not exit with 0"
[ "$(T display -p -t md '#{alternate_on}')" = 0 ]; check restored $? "the alternate screen is still on"
[ -s "$TMP/state/multidecode/autosave.json" ]; check autosave $? "no autosave"
grep -q '"multidecode-session"' "$TMP/state/multidecode/autosave.json" 2>/dev/null; check autosave-format $? "autosave is not a session"
done_
