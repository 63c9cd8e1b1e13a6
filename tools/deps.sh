#!/bin/sh
# Checks the Debian packages the build and tests need and installs the missing ones when it
# can (as root, or with sudo that asks no password); otherwise prints the one command to run
# and fails. Cheap when nothing is missing, so `make run` and `make test` call it every time.
#   tools/deps.sh          the build, the tests and the model fetch
#   tools/deps.sh fuzz     also clang and libFuzzer's runtime (make fuzz, make fuzz-smoke)
#   tools/deps.sh isa      also the aarch64 cross compiler and qemu-user (make test-isa)
set -eu
need=""
have_header() { for h in "$@"; do [ -f "/usr/include/$h" ] && return 0; done; return 1; }
command -v cc >/dev/null 2>&1 || need="$need build-essential"
command -v make >/dev/null 2>&1 || need="$need make"
have_header ncursesw/curses.h ncursesw/ncurses.h || need="$need libncurses-dev"
have_header readline/readline.h || need="$need libreadline-dev"
have_header jansson.h || need="$need libjansson-dev"
# tmux drives the TUI test (tests/test_tui_tmux.sh); python3 + pip fetch the default model.
command -v tmux >/dev/null 2>&1 || need="$need tmux"
command -v python3 >/dev/null 2>&1 || need="$need python3"
python3 -m pip --version >/dev/null 2>&1 || need="$need python3-pip"
if [ "${1:-}" = fuzz ]; then
    command -v clang >/dev/null 2>&1 || need="$need clang"
    ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1 ||
        need="$need libclang-rt-dev"
fi
if [ "${1:-}" = isa ]; then
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need="$need gcc-aarch64-linux-gnu"
    command -v qemu-aarch64 >/dev/null 2>&1 || need="$need qemu-user"
fi
[ -z "$need" ] && exit 0

cmd="apt-get update -qq && apt-get install -y -qq$need"
if [ "$(id -u)" = 0 ]; then SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo"
else
    echo "deps: missing Debian packages:$need" >&2
    echo "deps: install them with: sudo sh -c '$cmd'" >&2
    exit 1
fi
echo "deps: installing$need" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO sh -c "$cmd" >&2
