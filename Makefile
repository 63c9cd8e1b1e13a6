# multidecode - one Makefile for the program, its tests and its benchmarks.
#
#   make            build ./multidecode (CPU backends; CUDA too when nvcc is present, later)
#   make run        install what is missing, fetch the default model if missing, open the TUI
#   make test       install what is missing, build and run every test; the last line is
#                   "N passed, N failed, N skipped"
#   make asan       the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make soak       100,000 random forest operations under ASan + UBSan (SOAK_OPS, SOAK_SEED)
#   make bench      decode benchmark on random-weight models (JSON on stdout)
#   make model      fetch the default model into models/
#   make install    install the program, its man page and default keys (PREFIX, DESTDIR)
#   make uninstall  remove what make install installed
#   make clean      remove build outputs

CC      ?= cc
OPT     ?= -O2
ARCH    ?= -march=native
CFLAGS  := -std=c11 -D_GNU_SOURCE $(OPT) $(ARCH) -g -Wall -Wextra -Werror -pthread -MMD -MP $(EXTRA_CFLAGS)
LDLIBS  := -lm -pthread -ljansson -lncursesw -lreadline
BUILD   ?= build
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share/multidecode

LIB_SRC  := $(wildcard kernels/*.c kernels/ref/*.c kernels/cpu/*.c engine/*.c ui/*.c)
APP_SRC  := $(wildcard app/*.c)
TEST_SRC := $(wildcard tests/test_*.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
APP_OBJ  := $(APP_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
LIB      := $(BUILD)/libmultidecode.a

# all: the program.
all: multidecode

multidecode: $(BUILD)/multidecode
	cp $< $@

$(BUILD)/multidecode: $(APP_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(EXTRA_DEFS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(LIB) $(BUILD)/multidecode
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# deps: install the Debian packages the build and tests need (or say which command does).
deps:
	@sh tools/deps.sh

# test: install what is missing, build everything, run every test binary, print the
# summed result last.
test: deps
	@$(MAKE) --no-print-directory test-run

test-run: $(BUILD)/multidecode $(TEST_BIN)
	@BUILD=$(BUILD) sh tests/run.sh $(TEST_BIN) tests/test_tui_tmux.sh tests/test_man.sh

# asan: the test suite under ASan + UBSan, in its own build folder.
SANITIZE := BUILD=build-asan OPT=-O1 \
  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
asan:
	$(MAKE) $(SANITIZE) test

# soak: test_soak's long form under ASan + UBSan (tests/test_soak.c says what it does).
SOAK_OPS  ?= 100000
SOAK_SEED ?= 1
soak:
	$(MAKE) $(SANITIZE) build-asan/tests/test_soak
	build-asan/tests/test_soak $(SOAK_OPS) $(SOAK_SEED)

# model: the default model (SmolLM2-135M-Instruct) under models/.
model:
	sh tools/fetch-model.sh

# run: the TUI on the default model.
run: deps
	@$(MAKE) --no-print-directory multidecode
	@test -f models/SmolLM2-135M-Instruct.Q4_1.gguf || sh tools/fetch-model.sh
	./multidecode -m models/SmolLM2-135M-Instruct.Q4_1.gguf

# bench: decode throughput on random-weight models.
bench: multidecode
	sh tools/bench.sh

# install: the program into $(DESTDIR)$(BINDIR), the man page into man1 and the default
# key bindings into $(DESTDIR)$(DATADIR) (DESTDIR stages a package).
$(BUILD)/app/cmd_tui.o: EXTRA_DEFS := -DMD_DATADIR='"$(DATADIR)"'

install: $(BUILD)/multidecode
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DATADIR)
	install -m 755 $(BUILD)/multidecode $(DESTDIR)$(BINDIR)/multidecode
	install -m 644 man/multidecode.1 $(DESTDIR)$(MANDIR)/man1/multidecode.1
	install -m 644 assets/keys $(DESTDIR)$(DATADIR)/keys

# uninstall: remove the files install wrote (and the data folder when empty).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/multidecode $(DESTDIR)$(MANDIR)/man1/multidecode.1 $(DESTDIR)$(DATADIR)/keys
	-rmdir $(DESTDIR)$(DATADIR) 2>/dev/null

# clean: remove build outputs.
clean:
	rm -rf build build-asan multidecode

.PHONY: all deps test test-run asan soak model run bench clean install uninstall

-include $(LIB_OBJ:.o=.d) $(APP_OBJ:.o=.d)
