#!/bin/sh
# test_tui_tmux.sh - the TUI driven by scripted keys in a detached tmux session: each
# screen is captured and compared with tests/golden/tui/NAME.txt after masking the
# status line's timing figures and thread count, its probabilities and scores within one
# unit of their last digit (same_screen). Greedy decoding (:set temp 0) on the
# tiny stories260K model makes the screens deterministic. The session: start, help,
# grow, cot 4, the mask pane (scrolled, and the next step's preview), a fork from the
# text pane's alternatives, beam 2, prune, bookmarks and :merge, :save, quit (the
# terminal restored, the autosave written), a restart with --load showing the same
# forest, resizes to 200x60 and 60x20 ("too small"); a fresh start running
# `:lookahead 3 3 2 4` with the mask pane showing its last step (the tip and the window's
# cells "la l,i" at their positions; the draft policy's row cost is fixed by --row-cost,
# so the layout does not depend on the machine's speed). Then `make install` and
# `make uninstall` into a temporary DESTDIR. Also Ctrl-\ (SIGQUIT) and a crash
# (SIGSEGV): the terminal restored, and for Ctrl-\ the autosave written; a FIFO as the
# log file does not block the start. README.md's TUI example must equal the mask screen
# (tools/readme-tui.sh). :tour walks its screens; R turns a row by RoPE in the mask pane.
# Skips without tmux or the shared model.
# UPDATE_GOLDEN=1 rewrites the golden files and README.md's example. Ends with the usual
# "N passed, N failed, N skipped" line.
cd "$(dirname "$0")/.." || exit 1
P=0; F=0; S=0
MODEL=${MD_SHARED:-../shared}/models/stories260K.gguf
BIN=$(pwd)/${BUILD:-build}/multidecode
GOLD=${GOLD:-tests/golden/tui}
done_() { echo "$P passed, $F failed, $S skipped"; [ "$F" -eq 0 ]; exit $?; }
# missing WHAT: a skip, or a failure where MD_REQUIRE_FIXTURES=1 (CI: tests/t.h says why)
missing() {
    if [ -n "$MD_REQUIRE_FIXTURES" ] && [ "$MD_REQUIRE_FIXTURES" != 0 ]; then
        echo "FAIL: $1 (fixture missing, MD_REQUIRE_FIXTURES)"; F=1
    else echo "SKIP: $1"; S=1; fi
    done_
}
command -v tmux >/dev/null 2>&1 || missing "no tmux"
{ [ -f "$MODEL" ] && [ -x "$BIN" ]; } || missing "no $MODEL or $BIN"

TMP=$(mktemp -d)
SOCK="md-tui-test-$$"
T() { tmux -L "$SOCK" "$@"; }
cleanup() { T kill-server 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
check() { # check NAME CONDITION-RESULT MESSAGE
    if [ "$2" = 0 ]; then P=$((P + 1)); else F=$((F + 1)); echo "FAIL: $1: $3"; fi
}
capture() { T capture-pane -p -t md | sed -E 's/( [0-9]+ rows) .*$/\1 #/; s/[0-9]+ thr/# thr/g; s/[ ]+$//'; }
# the message line: above the key bar, the bottom line (the command line covers the bar)
msgline() { capture | tail -2 | head -1; }
# waits until the engine is idle and the screen stops changing (at most ~10 s)
settle() {
    prev=""; i=0
    while [ $i -lt 100 ]; do
        sleep 0.1
        cur=$(capture)
        if [ "$cur" = "$prev" ] && ! printf '%s' "$cur" | grep -q '| \(grow\|cot\|beam\|step\|draft\|lookahead\) '; then return 0; fi
        prev=$cur; i=$((i + 1))
    done
}
# same_screen GOLDEN GOT: the same lines but for the model's figures (percentages, [scores]
# and "score X": float results whose last digits depend on the CPU's vector width), each
# within one unit of its last printed digit of the golden one (the text around them exact)
same_screen() {
    awk 'function figs(s, f,   n) {
             n = 0
             while (match(s, / *-?[0-9]+(\.[0-9]+)?%|\[-?[0-9]+\.[0-9]+\]|score -?[0-9]+\.[0-9]+/)) {
                 f[++n] = substr(s, RSTART, RLENGTH); gsub(/[^-0-9.]/, "", f[n])
                 s = substr(s, 1, RSTART - 1) "#" substr(s, RSTART + RLENGTH)
             }
             f[0] = s; return n
         }
         function unit(x) { return index(x, ".") ? 10 ^ -(length(x) - index(x, ".")) : 1 }
         NR == FNR { want[FNR] = $0; n_want = FNR; next }
         { n_got = FNR; ng = figs(want[FNR], g); nh = figs($0, h)
           if (ng != nh || g[0] != h[0]) exit 1
           for (i = 1; i <= ng; i++) { d = g[i] - h[i]; if (d < 0) d = -d; if (d > unit(g[i]) * 1.001) exit 1 } }
         END { if (n_got != n_want) exit 1 }' "$1" "$2"
}
screen() { # screen NAME: compare the settled screen with its golden file
    settle
    capture > "$TMP/$1.txt"
    if [ -n "$UPDATE_GOLDEN" ]; then cp "$TMP/$1.txt" "$GOLD/$1.txt"; fi
    if same_screen "$GOLD/$1.txt" "$TMP/$1.txt"; then check "$1" 0; else
        check "$1" 1 "screen differs from $GOLD/$1.txt"; diff "$GOLD/$1.txt" "$TMP/$1.txt" | head -20; fi
}

mkdir -p "$TMP/state" "$TMP/config"
ENV="env TERM=xterm-256color LANG=C.UTF-8 LC_ALL=C.UTF-8 XDG_STATE_HOME=$TMP/state XDG_CONFIG_HOME=$TMP/config"
T new-session -d -s md -x 100 -y 30 "$ENV $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
sleep 0.5
k() { T send-keys -t md "$@"; }
# restart CMD: a new session md running CMD, made before the old one is killed so the
# tmux server never runs out of sessions (and exits) in between
restart() {
    T new-session -d -s md-next -x 100 -y 30 "$1"
    T kill-session -t md
    T rename-session -t md-next md
    sleep 0.5
}
k ':set temp 0' Enter
screen start
# Tab completes a command name after the prompt's ':' (it gave '::grow 4')
k ':gr' Tab ' 4'
sleep 0.3
capture | tail -1 | grep -q '^:grow  *4' && ! capture | tail -1 | grep -q '::'; check tab-complete $? "':gr<Tab> 4': $(capture | tail -1)"
k C-u Escape
# the bottom line is the key bar: the focused pane's keys, as htop and lazygit show them
sleep 0.3
capture | tail -1 | grep -q '^? help  : command  n grow  c cot  b beam  a append  d prune  u undo'
check keybar-forest $? "the forest pane's key bar: $(capture | tail -1)"
k Tab
sleep 0.3
capture | tail -1 | grep -q '^? help  : command  j alt-down  Enter alt-pick  W word-next'
check keybar-text $? "the text pane's key bar: $(capture | tail -1)"
k Tab
sleep 0.3
k '?'
screen help
k Escape
k ':grow 8' Enter
screen grow8
k ':cot 4 6' Enter
screen cot4
k v
screen mask
# README.md's TUI example is this screen (tools/readme-tui.sh; UPDATE_GOLDEN=1 rewrites it)
if [ -n "$UPDATE_GOLDEN" ]; then sh tools/readme-tui.sh "$TMP/mask.txt"; fi
sh tools/readme-tui.sh --check "$TMP/mask.txt"; check readme-example $? "README.md's TUI example is out of date"
k Tab h h
screen mask-left
k l l Tab
k N
screen preview
k v j Tab Left Left Down Enter
screen fork
k Tab a ' The end' Enter
settle
k ':beam 2 4' Enter
screen beam2
k v j j d
screen prune
k g j j m j j m ':merge' Enter
screen merge
k ":save $TMP/s.json" Enter
settle
grep -q '"multidecode-session"' "$TMP/s.json" 2>/dev/null; check save $? ":save wrote no session"
NODES=$(capture | grep -o '[0-9]* nodes')
SNODES=$NODES
k q
sleep 1
capture | grep -q 'EXITED rc=0'; check quit $? "the program did not exit with 0"
[ "$(T display -p -t md '#{alternate_on}')" = 0 ]; check restored $? "the alternate screen is still on"
[ -s "$TMP/state/multidecode/autosave.json" ]; check autosave $? "no autosave"
grep -q '"multidecode-session"' "$TMP/state/multidecode/autosave.json" 2>/dev/null; check autosave-format $? "autosave is not a session"
restart "$ENV $BIN -m $MODEL -t 1 --load $TMP/s.json; echo EXITED rc=\$?; sleep 60"
k s
screen reload
[ -n "$NODES" ] && capture | grep -q "$NODES"; check reload-nodes $? "the reloaded forest does not have $NODES"
T resize-window -t md -x 200 -y 60 2>/dev/null
screen big
T resize-window -t md -x 60 -y 20 2>/dev/null
settle
capture | grep -q 'terminal too small: 60x20, need 80x24'; check too-small $? "no 'too small' message at 60x20"
T resize-window -t md -x 100 -y 30 2>/dev/null
settle
k q
sleep 1
capture | grep -q 'EXITED rc=0'; check quit-reloaded $? "the reloaded program did not exit with 0"

# :lookahead on a fresh start: the mask pane shows the last step's tip and window
restart "$ENV $BIN -m $MODEL -t 1 --row-cost 0.25 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
k ':set temp 0' Enter
k ':lookahead 3 3 2 4' Enter
k v
screen lookahead
capture | grep -q 'done (lookahead 3,3,2: 4 tokens in'; check lookahead-done $? "no 'done' message for :lookahead"
k q
sleep 1
capture | grep -q 'EXITED rc=0'; check quit-lookahead $? "the program did not exit with 0 after :lookahead"

# Ctrl-\ (SIGQUIT) ends the TUI like q: the autosave written, the terminal's modes back
# (the pane prints stty's canonical-mode flag after the program), exit status 128 + 3;
# then a crash (SIGSEGV sent to the program) restores the terminal before dying
rm -f "$TMP/state/multidecode/autosave.json"
restart "sh -c 'echo \$\$ > $TMP/pid; exec $ENV $BIN -m $MODEL -t 1 \"Once upon a time\"'; echo EXITED rc=\$?; stty -a | grep -o ' -*icanon'; sleep 60"
k ':set temp 0' Enter ':grow 4' Enter
settle
k 'C-\'
sleep 1
capture | grep -q 'EXITED rc=131'; check sigquit-exit $? "Ctrl-\\ did not end the program with 131: $(capture | grep EXITED)"
[ "$(T display -p -t md '#{alternate_on}')" = 0 ]; check sigquit-screen $? "after Ctrl-\\ the alternate screen is still on"
[ "$(T display -p -t md '#{cursor_flag}')" = 1 ]; check sigquit-cursor $? "after Ctrl-\\ the cursor is hidden"
capture | grep -q '^ icanon'; check sigquit-tty $? "after Ctrl-\\ the terminal is not back in canonical mode"
grep -q '"multidecode-session"' "$TMP/state/multidecode/autosave.json" 2>/dev/null; check sigquit-autosave $? "no autosave after Ctrl-\\"
restart "sh -c 'echo \$\$ > $TMP/pid; exec $ENV $BIN -m $MODEL -t 1 \"Once upon a time\"'; echo EXITED rc=\$?; stty -a | grep -o ' -*icanon'; sleep 60"
settle
kill -SEGV "$(cat "$TMP/pid")"
sleep 1
capture | grep -q 'EXITED rc=[1-9]'; check segv-exit $? "the program did not fail after SIGSEGV: $(capture | grep EXITED)"
[ "$(T display -p -t md '#{alternate_on}')" = 0 ]; check segv-screen $? "after SIGSEGV the alternate screen is still on"
[ "$(T display -p -t md '#{cursor_flag}')" = 1 ]; check segv-cursor $? "after SIGSEGV the cursor is hidden"
capture | grep -q '^ icanon'; check segv-tty $? "after SIGSEGV the terminal is not back in canonical mode"

# text typed at append> (a) is text, verbatim: a leading ':' runs no command and leading
# spaces stay
restart "$ENV $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
k a ':) smiley' Enter
settle
! capture | grep -q 'unknown command'; check append-colon $? "append> ran ':)' as a command: $(msgline)"
k a ':quit is a word' Enter
settle
capture | grep -q 'EXITED'; [ $? != 0 ] && ! capture | grep -q 'usage: :quit'; check append-quit $? "append> ran ':quit is a word': $(msgline)"
capture | grep -q ':) smiley :quit is a word'; check append-text $? "the appended text is not there: $(capture | sed -n 2p)"
k q
sleep 1

# s (one step) works after the first tree is deleted (its job named no node)
restart "$ENV $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
k ':set temp 0' Enter g d
settle
k ':ask Hello' Enter
settle
k N
settle
k s
settle
! capture | grep -q 'nothing selected'; check step-after-delete $? "s after deleting the first tree: $(msgline)"
k q
sleep 1

# prune, undo and redo: pruning one of three chains says what went and selects a sibling;
# the last survivor keeps its own line under the prompt (it merged into the prompt's
# line before, and d on it pruned the prompt too); three undos restore all three, a
# fourth says there is nothing left, U prunes again; Enter on the alternative already
# chosen selects that branch instead of making a second copy
restart "$ENV $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
# a session started with a prompt is work no file has: :load asks first (it replaced it)
k ":load $TMP/s.json" Enter
sleep 0.5
msgline | grep -q 'unsaved changes'; check load-asks $? ":load after a prompt argument: $(msgline)"
k n
sleep 0.3
flines() { capture | sed -n '2,27p' | grep -c '^ *[▾▸·]'; }
k ':set temp 0' Enter ':cot 3 5' Enter
settle
k j j d
settle
capture | grep -q 'pruned 5 nodes (1 branch)'; check prune-msg $? "no message saying what was pruned: $(msgline)"
[ "$(flines)" = 3 ]; check prune-one $? "3 lines: $(capture | sed -n 2,5p)"
k d
settle
[ "$(flines)" = 2 ]; check prune-survivor-line $? "the survivor merged into the prompt's line: $(capture | sed -n 2,4p)"
! capture | sed -n 2p | grep -q 'time░'; check prune-near $? "the selection went to the prompt, not the sibling: $(capture | sed -n 2p)"
k d
settle
[ "$(flines)" = 1 ] && capture | sed -n 2p | grep -q 'Once upon a time'; check prune-keeps-prompt $? "d on the survivor: $(capture | sed -n 2,3p)"
k u u u
settle
[ "$(flines)" = 4 ] && capture | grep -q 'restored 5 nodes'; check undo-levels $? "three undos: $(capture | sed -n 2,6p; msgline)"
k u
settle
capture | grep -q 'nothing to undo'; check undo-empty $? "a fourth undo: $(msgline)"
k U
settle
[ "$(flines)" = 3 ] && capture | grep -q 'pruned 5 nodes (1 branch) again'; check redo $? "U: $(capture | sed -n 2,6p; msgline)"
k ':grow 4' Enter
settle
NODES=$(capture | grep -o '[0-9]* nodes')
k Tab Left Enter
settle
capture | grep -q 'already a branch here' && capture | grep -q "$NODES"; check fork-dup $? "Enter on the chosen token: $(capture | tail -3 | head -2)"
k q
sleep 1

# loom editing: e puts the line's text on the command line, and the edited text becomes a
# branch beside it (forking where the edit begins, the original kept); D shows the
# selected branch beside the bookmarked one from their first difference; i in the text
# pane forks at the cursor token with your own words; :name names a branch
restart "$ENV $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
k ':set temp 0' Enter ':grow 6' Enter
settle
k e
sleep 0.3
capture | tail -1 | grep -q '^edit> .*Once upon a time, there was a little'; check edit-prefill $? "e: $(capture | tail -1)"
k C-u 'Once upon a time, there was a big dog' Enter
settle
[ "$(flines)" = 3 ] && msgline | grep -q 'written beside the original'; check edit-writes $? "the edit: $(capture | sed -n 2,5p; msgline)"
k k m j D
settle
capture | sed -n 2p | grep -q 'differ from token [0-9]*: selected | bookmarked' && capture | cut -c42- | grep -q 'big dog' && capture | cut -c42- | grep -q 'little'
check diff-view $? "D: $(capture | sed -n 2,6p)"
# :name names the selected line's branch, drawn at its end
k ':name hero' Enter
settle
capture | sed -n 2,6p | grep -q 'big dog «hero»'; check name $? ":name hero: $(capture | sed -n 2,6p; msgline)"
k D Tab Left Left i
sleep 0.3
capture | tail -1 | grep -q '^fork>'; check fork-text-prompt $? "i: $(capture | tail -1)"
k ' with a red hat' Enter
settle
[ "$(flines)" = 5 ] && msgline | grep -q 'written beside the original'; check fork-text $? "i: $(capture | sed -n 2,7p; msgline)"
k q
sleep 1

# numbered autosaves: each run's autosave moves to autosave.1.json at the next start
# (then .2, ...), so a new run never overwrites the last one's work; :load (of the last
# run's, here) asks before it throws away unsaved work, and n keeps the work
ENV3=$(printf '%s' "$ENV" | sed "s|XDG_STATE_HOME=[^ ]*|XDG_STATE_HOME=$TMP/state3|")
AS="$TMP/state3/multidecode"
restart "$ENV3 $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
k ':set temp 0' Enter ':grow 4' Enter
settle
k q
sleep 1
cp "$AS/autosave.json" "$TMP/runA.json" 2>/dev/null
restart "$ENV3 $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
k ':set temp 0' Enter ':grow 2' Enter
settle
k q
sleep 1
restart "$ENV3 $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
settle
cmp -s "$AS/autosave.2.json" "$TMP/runA.json" && [ -s "$AS/autosave.1.json" ] && [ ! -e "$AS/autosave.json" ]
check autosave-rotate $? "the first run's autosave is not autosave.2.json: $(ls "$AS")"
capture | grep -q 'last session: :load'; check autosave-hello $? "no word of the last session: $(msgline)"
k ':set temp 0' Enter ':grow 3' Enter
settle
NODES=$(capture | grep -o '[0-9]* nodes')
k ':load' Enter
settle
capture | tail -4 | head -3 | tr '\n' ' ' | grep -q 'unsaved changes: load .*autosave.1.json and lose them? (y/n'; check load-asks $? ":load did not ask: $(capture | tail -4 | head -3)"
k n
settle
capture | grep -q "$NODES" && capture | grep -q 'not loaded'; check load-no $? "n did not keep the work: $(capture | tail -3 | head -2)"
k ':load' Enter y
settle
capture | grep -q 'loaded .*autosave.1.json'; check load-yes $? "y did not load: $(msgline)"
k q
sleep 1

# what a run did: grow's done says how many tokens and why it stopped, a budget stop is
# marked … (an end of text ✓), beam hypotheses show their scores in the tree
restart "$ENV $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
k ':set temp 0' Enter ':grow 6' Enter
settle
capture | grep -q 'done: +6 tokens, 1 branch; stopped: budget'; check grow-done $? "grow's done: $(msgline)"
capture | sed -n 2p | grep -q '^·…'; check budget-mark $? "no budget mark: $(capture | sed -n 2p)"
k ':beam 3 5' Enter
settle
[ "$(capture | sed -n 2,8p | grep -c ' \[-[0-9.]*\] *│')" = 3 ] && capture | grep -q 'done: 3 results, best score -'
check beam-scores $? "beam scores: $(capture | sed -n 2,6p; msgline)"
k '?'
settle
k j j j j j j j j j j j j j j j j j j j j j j j j j j j j j j j j j j j j j j j
settle
capture | grep -q '✓  ended: end of text' && capture | grep -q '…  stopped by the budget'; check help-marks $? "the help does not explain the marks: $(capture | grep -A3 Marks)"
k Escape
# / searches the lines: from the first line, ' a' (in both lines) is found next on line 2,
# match 2 of 2; C-n wraps around to match 1
k g / ' a' Enter
sleep 0.3
msgline | grep -q '/ a: match 2 of 2'; check search $? "/ a: $(msgline)"
k C-n
sleep 0.3
msgline | grep -q '/ a: match 1 of 2'; check search-next $? "C-n: $(msgline)"
# :set alone shows the values; ' without bookmarks says so; an export that cannot be
# written says why
k ':set' Enter
settle
msgline | grep -q 'temp 0  top_k .* budget 32'; check set-show $? ":set alone: $(msgline)"
k "'"
settle
msgline | grep -q 'no bookmarks'; check no-bookmarks $? "' without bookmarks: $(msgline)"
k ":export $TMP/no/such/dir/x.md" Enter
settle
msgline | grep -q 'cannot write .*x.md: No such file or directory'; check export-errno $? ":export: $(msgline)"
k q
sleep 1

# SmolLM2 (byte-level BPE, chat template; skipped without models/): non-ASCII text is
# drawn decoded, never as the vocabulary's byte characters ("æĿ") or U+FFFD; wide,
# combining, emoji and right-to-left characters keep the pane divider in its column
SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
# divider_ok: every pane row of the capture has the divider at column 48 (120 x 40)
divider_ok() {
    capture | sed -n '2,37p' | sed 's/│.*//' > "$TMP/rows"
    [ "$(wc -l < "$TMP/rows")" = 36 ] || return 1
    while IFS= read -r row; do
        [ "$(printf '%s\n' "$row" | LC_ALL=C.UTF-8 wc -L)" = 48 ] || return 1
    done < "$TMP/rows"
}
# up: waits (at most ~20 s) until the TUI has drawn its title (the model takes a moment)
up() { i=0; while [ $i -lt 200 ] && ! capture | grep -q '^ multidecode '; do sleep 0.1; i=$((i + 1)); done; }
if [ -f "$SMOL" ]; then
    SMOLRUN="$ENV $BIN -m $SMOL -t 1"
    restart "$SMOLRUN --raw '東京は日本の首都です。'; echo EXITED rc=\$?; sleep 60"
    T resize-window -t md -x 120 -y 40 2>/dev/null
    up
    k ':set temp 0' Enter ':grow 6' Enter
    settle
    [ "$(capture | grep -o '東京は日本の首都です。' | wc -l)" -ge 2 ]; check cjk-text $? "the CJK prompt is not drawn decoded in both panes: $(capture | sed -n 2p)"
    ! capture | grep -q 'æĿ\|�'; check cjk-no-pieces $? "byte-level pieces or U+FFFD on screen: $(capture | grep -m1 'æĿ\|�')"
    divider_ok; check cjk-columns $? "the divider moved: $(capture | sed -n 2p)"
    restart "$SMOLRUN --raw 'Cafe$(printf '\314\201') naïve 😀🎉 שלום مرحبا 你好'; echo EXITED rc=\$?; sleep 60"
    T resize-window -t md -x 120 -y 40 2>/dev/null
    up
    k ':set temp 0' Enter ':grow 8' Enter
    settle
    [ "$(capture | grep -o "Cafe$(printf '\314\201') naïve 😀🎉 שלום مرحبا 你好" | wc -l)" -ge 2 ]; check mixed-text $? "mixed text not drawn whole: $(capture | sed -n 2p)"
    divider_ok; check mixed-columns $? "the divider moved: $(capture | sed -n 2p)"
    # a leading space typed at append> stays (byte-level BPE adds none of its own)
    k a ' Café' Enter
    settle
    capture | grep -q "你好.* Café░"; check append-space $? "' Café' lost its space: $(capture | sed -n 2p)"
    k q
    sleep 1
    # chat mode (the default with a chat template): typed text is a user turn ending with
    # the assistant's header, so n grows an answer; --raw and :set chat off type raw text,
    # and a branch that ends at <|im_end|> says so
    restart "$SMOLRUN; echo EXITED rc=\$?; sleep 60"
    T resize-window -t md -x 120 -y 40 2>/dev/null
    up
    capture | grep -q ' typing: chat |'; check chat-mode $? "no chat mode in the status line: $(capture | tail -3 | head -1)"
    # the status line drops whole fields it has no room for (the long model name, which
    # the title shows) instead of losing its end
    T capture-pane -p -t md | tail -3 | head -1 | grep -q '^ typing: chat | .* tok/s *$'
    check status-fits $? "the status line at 120 columns: $(T capture-pane -p -t md | tail -3 | head -1)"
    k ':set temp 0' Enter ':set budget 4' Enter a 'What is the capital of France?' Enter
    settle
    k n
    settle
    # (each newline, drawn ↵, also breaks the text pane's row)
    capture | sed -n '2,33p' | LC_ALL=C.UTF-8 sed 's/^[^│]*│//' > "$TMP/pane"
    grep -A2 'France?<|im_end|>↵$' "$TMP/pane" | sed -n 2p | grep -q '^<|im_start|>assistant↵$' &&
        grep -A1 '^<|im_start|>assistant↵$' "$TMP/pane" | sed -n 2p | grep -q '^[^ ░]'
    check chat-answer $? "no answer on its own row after the user turn: $(cat "$TMP/pane" | head -8)"
    k ':set chat off' Enter
    settle
    capture | grep -q ' typing: raw |'; check chat-off $? ":set chat off: $(capture | tail -3 | head -2)"
    k q
    sleep 1
    restart "$SMOLRUN --raw 'What is the capital of France?'; echo EXITED rc=\$?; sleep 60"
    T resize-window -t md -x 120 -y 40 2>/dev/null
    up
    k ':set temp 0' Enter n
    settle
    capture | grep -q ' typing: raw |' && capture | grep -q 'stopped: end of turn <|im_end|>'; check chat-raw-ended $? "--raw, n: $(capture | tail -3 | head -2)"
    # cot where the end of turn is the best first token: that chain leaves no branch, and
    # done says so
    k c
    settle
    capture | grep -q 'done: 3 of 4 chains, 1 ended at once, +[0-9]* tokens'; check cot-ended-at-once $? "c at the end of the answer: $(msgline)"
    k q
    sleep 1
    # :load of the stories260K session: the whole refusal, word-wrapped over the bottom
    # rows (it was cut at 256 characters), says how to force it; :load! does
    restart "$SMOLRUN; echo EXITED rc=\$?; sleep 60"
    up
    k ":load $TMP/s.json" Enter
    settle
    capture | tail -5 | head -4 | tr '\n' ' ' | grep -q "saved with model 'stories260K.gguf' .* but the model in use is 'SmolLM2.*, or :load! FILE loads it anyway *\$"
    check load-mismatch-whole $? ":load of another model's session: $(capture | tail -5 | head -4)"
    k ":load! $TMP/s.json" Enter
    settle
    msgline | grep -q 'loaded .*s.json (its model check skipped)' && capture | grep -q "$SNODES"
    check load-force $? ":load!: $(capture | tail -3 | head -2)"
    k q
    sleep 1
else
    echo "SKIP: no $SMOL (SmolLM2 checks)"; S=$((S + 1))
fi

# :tour walks its screens (n forward, p back), each naming itself, the fork's two rows at
# one position in two slots; q leaves it; then R in the mask pane turns the selected row
# by RoPE: pair 0's angle is its position in radians (theta_0 = 1), in degrees mod 360
restart "$ENV $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
settle
k ':tour' Enter
settle
bad=0
for i in 1 2 3 4 5 6 7; do
    capture | grep -q "^ tour $i of 7 " && capture | grep -q "^The tour, $i of 7: " || { bad=$i; break; }
    [ $i = 3 ] && capture > "$TMP/fork"
    k n
    sleep 0.3
done
check tour-walk $bad "screen $bad of the tour: $(capture | head -2)"
f0=$(grep '^  row 0: ' "$TMP/fork" | sed -E 's/.* pos ([0-9]+)  slot ([0-9]+).*/\1 \2/')
f1=$(grep '^  row 1: ' "$TMP/fork" | sed -E 's/.* pos ([0-9]+)  slot ([0-9]+).*/\1 \2/')
[ -n "$f0" ] && [ "${f0% *}" = "${f1% *}" ] && [ "${f0#* }" != "${f1#* }" ]
check tour-fork $? "the fork's rows (pos slot): '$f0' / '$f1'"
k p
sleep 0.3
capture | grep -q '^The tour, 6 of 7: '; check tour-back $? "p: $(capture | sed -n 2p)"
k q
settle
capture | grep -q '^ multidecode stories260K.gguf'; check tour-leave $? "q: $(capture | head -1)"
k ':set temp 0' Enter ':cot 2 3' Enter
settle
k v Tab R
settle
rl=$(capture | grep -o 'row [0-9]* pos [0-9]*: *[0-9]*' | head -1)
capture | grep -q 'pos = RoPE position = depth' && [ -n "$rl" ] &&
    echo "$rl" | awk '{ p = $4 + 0; a = p * 180 / 3.14159265358979; a -= 360 * int(a / 360); d = a - $5; if (d < 0) d = -d; exit !(d <= 0.5 || d >= 359.5) }'
check rope-view $? "R: '$rl' $(capture | grep -m1 'RoPE')"
capture | grep -q '│  parent pos [0-9]*:'; check rope-parent $? "R: no parent line: $(capture | grep -A3 'RoPE')"
k q
sleep 1

# a FIFO where the log goes does not block the start (the log is skipped)
mkdir -p "$TMP/state2/multidecode"
mkfifo "$TMP/state2/multidecode/tui.log"
restart "$(printf '%s' "$ENV" | sed "s|XDG_STATE_HOME=[^ ]*|XDG_STATE_HOME=$TMP/state2|") $BIN -m $MODEL -t 1 'Once upon a time'; echo EXITED rc=\$?; sleep 60"
settle
capture | grep -q 'multidecode stories260K.gguf'; check log-fifo $? "the TUI did not start with a FIFO as its log"
k q
sleep 1
capture | grep -q 'EXITED rc=0'; check log-fifo-quit $? "the program did not exit with 0 (log FIFO)"
T kill-session -t md

# make install / uninstall into a temporary DESTDIR (the binary already built). Not when a
# source changed since the build: make install would link the binary again while the other
# tests run it (without the sanitizer flags, under make asan).
D="$TMP/dest"
if ! make -q BUILD="${BUILD:-build}" "${BUILD:-build}/multidecode" >/dev/null 2>&1; then
    echo "SKIP: make install: a source changed since ${BUILD:-build}/multidecode was built"
    S=$((S + 2))
    done_
fi
if make -s install BUILD="${BUILD:-build}" DESTDIR="$D" PREFIX=/usr >/dev/null 2>&1; then
    [ -x "$D/usr/bin/multidecode" ] && [ -f "$D/usr/share/man/man1/multidecode.1" ] && [ -f "$D/usr/share/multidecode/keys" ]
    check install $? "make install did not install the binary, the man page and the keys"
else check install 1 "make install failed"; fi
make -s uninstall DESTDIR="$D" PREFIX=/usr >/dev/null 2>&1 && [ -z "$(find "$D" -type f)" ]
check uninstall $? "make uninstall left files: $(find "$D" -type f | head -3)"
done_
