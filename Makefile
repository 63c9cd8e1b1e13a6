# multidecode - one Makefile for the program, its tests and its benchmarks.
#
#   make            build ./multidecode (CPU backends; CUDA too when nvcc is present)
#   make run        install what is missing, fetch the default model if missing, open the TUI
#   make test       install what is missing, build and run every test; the last line is
#                   "N passed, N failed, N skipped"
#   make asan       the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-isa   the kernel, model and forest-exactness tests at every instruction-set
#                   level: plain C, AVX2, AVX-512 (where the CPU has it), aarch64 NEON (qemu)
#   make cuda-check the CUDA kernels compiled for sm_80/sm_90 (needs nvcc), failing on spills
#   make cuda-test  the CUDA kernel test on the GPU (needs nvcc and a device)
#   make gpu-pack   build/gpu-pack: everything tools/gpu-run.sh needs on a GPU machine (sm_90)
#   make soak       100,000 random forest operations under ASan + UBSan (SOAK_OPS, SOAK_SEED)
#   make fuzz       each libFuzzer harness of tests/fuzz/ for FUZZ_TIME seconds (clang)
#   make fuzz-smoke each harness for about a minute (what CI runs)
#   make bench      decode benchmark on random-weight models (JSON on stdout)
#   make model      fetch the default model into models/
#   make install    install the program, its man page and default keys (PREFIX, DESTDIR)
#   make uninstall  remove what make install installed
#   make clean      remove build outputs

CC      ?= cc
OPT     ?= -O2
ARCH    ?= -march=native
CFLAGS  := -std=c11 -D_GNU_SOURCE $(OPT) $(ARCH) -g -Wall -Wextra -Werror -pthread -MMD -MP -I. -Iengine $(EXTRA_CFLAGS)
LDLIBS  := -lm -pthread -ldl -ljansson -lncursesw -lreadline
BUILD   ?= build
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share/multidecode
# (the CUDA backend's folder: the program looks in ../lib/multidecode from its own)
LIBDIR  ?= $(PREFIX)/lib/multidecode

LIB_SRC  := $(wildcard base/*.c kernels/*.c kernels/ref/*.c kernels/cpu/*.c engine/*/*.c ui/*.c)
APP_SRC  := $(wildcard app/*.c app/bench/*.c)
TEST_SRC := $(wildcard tests/test_*.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
APP_OBJ  := $(APP_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# the fuzz harnesses (tests/fuzz/fuzz_NAME.c), each also linked with a replay main()
FUZZ_NAMES  := gguf tok_spm tok_bpe session chat keys
FUZZ_OBJ    := $(FUZZ_NAMES:%=$(BUILD)/tests/fuzz/fuzz_%.o) $(BUILD)/tests/fuzz/replay.o
FUZZ_REPLAY := $(FUZZ_NAMES:%=$(BUILD)/tests/fuzz/replay_%)
LIB      := $(BUILD)/libmultidecode.a

# all: the program.
all: multidecode

multidecode: $(BUILD)/multidecode $(PROG_CU_LIB)
	cp $< $@
	$(if $(PROG_CU_LIB),cp $(PROG_CU_LIB) $(notdir $(PROG_CU_LIB)))

$(BUILD)/multidecode: $(APP_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(APP_OBJ) $(LIB) $(LDLIBS) $(PROG_CU_LIBS)

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(EXTRA_DEFS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(LIB) $(BUILD)/multidecode
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# ---- CUDA: kernels/cuda/ ----
# The .cu sources (the kernels and the backend, kernels/cuda/backend.cu) build two ways.
# Emulated: as C++ with the project's CUDA-on-CPU emulation (kernels/cuda/emu.h) into
# $(BUILD)/emu/, linked into the tests/test_cuda_emu*.cc binaries and the C tests
# tests/test_cuda_*.c (the cuda backend against ref, the forest through it) that make test
# runs on every machine (only a C++17 compiler needed); the program itself never has the
# emulated backend. Device: when nvcc exists and CUDA is not 0, they compile for sm_80 and
# sm_90 plus PTX, position-independent, into build/cuda/pic/ (also under make asan: nvcc
# gets no sanitizer flags), and are linked with cuBLAS and the static CUDA runtime into
# $(BUILD)/multidecode-cuda.so, which the program loads (dlopen, kernels/backend.c) only
# when --backend cuda asks for it, so that no other start pays for loading cuBLAS; it is
# copied beside ./multidecode and installed into $(LIBDIR). cuda-check prints each sm_90
# kernel's resource use and fails when one spills registers; make test runs it.
CUDA      ?= 1
NVCC      ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
NVCCFLAGS ?= -std=c++17 -O3 -I. -Xptxas -v $(CUDA_ARCH) -Xcompiler -fPIC
EMU_CXXFLAGS := -std=c++17 $(OPT) -g -Wall -Wextra -Werror -ffp-contract=off -MMD -MP -I. \
                $(EXTRA_CFLAGS)
CU_SRC       := $(wildcard kernels/cuda/*.cu)
CU_EMU_OBJ   := $(CU_SRC:%.cu=$(BUILD)/emu/%.o)
CU_BUILD     ?= build/cuda
CU_DEV_OBJ   := $(CU_SRC:kernels/cuda/%.cu=$(CU_BUILD)/pic/%.o)
EMU_TEST_BIN := $(patsubst tests/%.cc,$(BUILD)/tests/%,$(wildcard tests/test_cuda_emu*.cc))
TEST_BIN     += $(EMU_TEST_BIN)
CUDA_CHECK   := $(if $(filter-out 0,$(CUDA)),$(if $(NVCC),cuda-check))
CU_C_TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/test_cuda_*.c))
# the device backend as a shared object: its objects, cuBLAS (found beside nvcc, its path
# kept in the object) and the static runtime. The program exports what the backend calls
# (kern_backend_fail, st_set, dtype_row_bytes, ...: kern_*, st_*, dtype_*, vec_*) and
# links libdl, nothing of CUDA.
CUDA_LIBDIR  ?= $(patsubst %/bin/nvcc,%,$(NVCC))/lib64
CU_LINK      := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublas -lcudart_static -ldl -lrt -lstdc++
PROG_CU_LIB  := $(if $(CUDA_CHECK),$(BUILD)/multidecode-cuda.so)
PROG_CU_LIBS := $(if $(CUDA_CHECK),$(foreach p,kern st dtype vec,-Wl,--export-dynamic-symbol='$(p)_*'))
$(BUILD)/multidecode: | $(PROG_CU_LIB)

$(BUILD)/multidecode-cuda.so: $(CU_DEV_OBJ)
	@mkdir -p $(dir $@)
	$(CXX) -shared -o $@ $(CU_DEV_OBJ) $(CU_LINK) -pthread

$(BUILD)/emu/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -x c++ -c -o $@ $<

$(EMU_TEST_BIN): $(BUILD)/tests/%: tests/%.cc $(CU_EMU_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -o $@ $< $(CU_EMU_OBJ) $(LIB) $(LDLIBS)

# the C tests of the cuda backend, linked with its emulated build
$(CU_C_TEST_BIN): $(BUILD)/tests/%: tests/%.c $(CU_EMU_OBJ) $(LIB) $(BUILD)/multidecode
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(CU_EMU_OBJ) $(LIB) $(LDLIBS) -lstdc++

# the same tests linked with the device build, for a GPU (make cuda-test, make gpu-pack)
$(CU_BUILD)/tests/%: tests/%.c $(CU_DEV_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(CU_DEV_OBJ) $(LIB) $(LDLIBS) $(CU_LINK)

# cuda-check: the kernels compiled for the GPU, failing on register spills.
cuda-check: $(if $(NVCC),$(CU_DEV_OBJ))
	@$(if $(NVCC),echo "cuda-check: $(words $(CU_DEV_OBJ)) files for sm_80 + sm_90 + PTX without spills",echo "cuda-check: no nvcc found (set NVCC=/path/to/nvcc)"; false)

$(CU_BUILD)/pic/%.o: kernels/cuda/%.cu $(wildcard kernels/cuda/*.h kernels/cuda/*.cuh)
	@mkdir -p $(dir $@)
	@echo "NVCC $<"
	@$(NVCC) $(NVCCFLAGS) -c -o $@ $< > $(@:.o=.ptxas) 2>&1 || { cat $(@:.o=.ptxas); rm -f $@; exit 1; }
	@awk -f kernels/cuda/ptxas.awk $(@:.o=.ptxas) || { rm -f $@; exit 1; }

# cuda-test: tests/test_cuda_emu_kernels.cc built with nvcc, and the cuda backend's C tests
# linked with the device build, run on the GPU (each reports itself skipped without one).
$(CU_BUILD)/test_cuda_kernels: tests/test_cuda_emu_kernels.cc $(CU_DEV_OBJ) $(LIB)
	$(NVCC) -std=c++17 -O2 -I. $(CUDA_ARCH) -x cu -c -o $@.o $<
	$(NVCC) $(CUDA_ARCH) -o $@ $@.o $(CU_DEV_OBJ) $(LIB) $(subst -pthread,-Xcompiler -pthread,$(LDLIBS)) -lcublas

CU_DEV_TEST_BIN := $(CU_C_TEST_BIN:$(BUILD)/tests/%=$(CU_BUILD)/tests/%)
cuda-test: $(CU_BUILD)/test_cuda_kernels $(CU_DEV_TEST_BIN)
	$(CU_BUILD)/test_cuda_kernels
	@for t in $(CU_DEV_TEST_BIN); do echo "== $$t"; $$t || exit 1; done

test-run: $(CUDA_CHECK)

# gpu-pack: what a short GPU window needs, built here for sm_90 into $(GPU_PACK) (git-ignored,
# at most 64 MiB, carried to the GPU machine beside the working tree): the program and its
# CUDA plugin, the CUDA test programs, tools/gpu-run.sh, the stories260K fixture, and the
# shared libraries that machine may lack, unpacked from this system's Debian packages
# (apt-get download + dpkg -x) into lib/ for LD_LIBRARY_PATH. cuBLAS is not packed: the
# plugin needs libcublas.so.13, which the GPU machine's CUDA 13 has. The host code is built
# for x86-64-v3 (AVX2), which any GPU machine's CPU runs. gpu-pack-check: a copy of the
# pack alone resolves every library but the CUDA ones (tools/gpu-pack.sh check).
GPU_PACK     ?= build/gpu-pack
GPU_PACK_OBJ := build/gpu-pack-obj
GPU_PACK_BIN := $(GPU_PACK_OBJ)/multidecode $(GPU_PACK_OBJ)/multidecode-cuda.so \
                $(GPU_PACK_OBJ)/cuda/test_cuda_kernels \
                $(CU_C_TEST_BIN:$(BUILD)/tests/%=$(GPU_PACK_OBJ)/cuda/tests/%)
gpu-pack:
	@$(if $(NVCC),,echo "gpu-pack: no nvcc found (set NVCC=/path/to/nvcc)"; false)
	$(MAKE) BUILD=$(GPU_PACK_OBJ) CU_BUILD=$(GPU_PACK_OBJ)/cuda ARCH=-march=x86-64-v3 \
	  CUDA_ARCH='-gencode arch=compute_90,code=sm_90' $(GPU_PACK_BIN)
	sh tools/gpu-pack.sh build $(GPU_PACK) $(GPU_PACK_BIN)
gpu-pack-check: gpu-pack
	sh tools/gpu-pack.sh check $(GPU_PACK)

-include $(CU_EMU_OBJ:.o=.d) $(EMU_TEST_BIN:=.d) $(CU_C_TEST_BIN:=.d)

# deps: install the Debian packages the build and tests need (or say which command does).
deps:
	@sh tools/deps.sh

# The replay binaries: each harness fed its regression inputs, tests/fuzz/regress/NAME/.
$(BUILD)/tests/fuzz/replay_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/replay.o $(LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

.SECONDARY: $(FUZZ_OBJ)

# test: install what is missing, build everything, run every test binary, print the
# summed result last.
test: deps
	@$(MAKE) --no-print-directory test-run

test-run: $(BUILD)/multidecode $(TEST_BIN) $(FUZZ_REPLAY)
	@BUILD=$(BUILD) sh tests/run.sh $(TEST_BIN) $(FUZZ_REPLAY) tests/test_tui_tmux.sh tests/test_man.sh

# test-isa: ISA_TESTS built and run by tools/test-isa.sh once per instruction-set level,
# each level in its own build folder (build-isa/LEVEL) with its own CC, ARCH and
# EXTRA_CFLAGS. They link the library without ui/ and only libc's libraries, so a bare
# cross toolchain builds them (no curses, readline or jansson for the target).
ISA_TESTS := test_simd test_kernels test_kernels_arch test_backend test_dequant_golden test_model test_forest test_qmodels
ISA_BIN   := $(ISA_TESTS:%=$(BUILD)/isa/%)
ISA_LIB   := $(BUILD)/isa/libcore.a
test-isa:
	@sh tools/deps.sh isa
	@sh tools/test-isa.sh

# isa-bins, print-isa-tests: for tools/test-isa.sh (which sets BUILD, CC, ARCH, EXTRA_CFLAGS).
isa-bins: $(ISA_BIN)
print-isa-tests:
	@echo $(ISA_TESTS)

$(ISA_LIB): $(filter-out $(BUILD)/ui/%,$(LIB_OBJ))
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

$(ISA_BIN): $(BUILD)/isa/%: tests/%.c $(ISA_LIB)
	$(CC) $(CFLAGS) -o $@ $< $(ISA_LIB) -lm -pthread -ldl

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

# ---- fuzzing: libFuzzer (clang) builds in build/fuzz/ ----
CLANG      ?= clang
FUZZ_TIME  ?= 300
FUZZ_JOBS  ?= 1
FUZZ_SAN   := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# fuzz-build: the library with coverage instrumentation and sanitizers, and
# build/fuzz/bin/fuzz_NAME linked with libFuzzer (a recursive make with BUILD=build/fuzz;
# CUDA=0: the harnesses need no cuda backend, so none is compiled for them).
fuzz-build:
	@sh tools/deps.sh fuzz
	$(MAKE) BUILD=build/fuzz CC=$(CLANG) OPT=-O1 CUDA=0 \
	  EXTRA_CFLAGS="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" fuzz-bins

# fuzz-bins: only inside fuzz-build, where BUILD is build/fuzz and CC is clang.
fuzz-bins: $(FUZZ_NAMES:%=$(BUILD)/bin/fuzz_%)

$(BUILD)/bin/fuzz_%: tests/fuzz/fuzz_%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(LIB) $(LDLIBS)

# fuzz-seeds: seed corpora in build/fuzz/corpus/NAME/ from the fixtures and from files
# the program writes (tools/fuzz-seeds.py).
fuzz-seeds: $(BUILD)/multidecode
	python3 tools/fuzz-seeds.py --bin $(BUILD)/multidecode --out build/fuzz/corpus

# fuzz: every harness for FUZZ_TIME seconds, FUZZ_JOBS of them at a time; one summary line
# each (logs in build/fuzz/logs/, crashing inputs in build/fuzz/crashes/). Fails when any
# harness found something. One harness alone: sh tools/fuzz-run.sh NAME SECONDS.
fuzz: fuzz-build fuzz-seeds
	@printf '%s\n' $(FUZZ_NAMES) | xargs -P $(FUZZ_JOBS) -I{} sh tools/fuzz-run.sh {} $(FUZZ_TIME)

# fuzz-smoke: each harness for a minute (FUZZ_JOBS at a time), as CI does.
fuzz-smoke:
	$(MAKE) fuzz FUZZ_TIME=60

# model: the default model (SmolLM2-135M-Instruct) under models/; MODEL=gemma3 fetches
# Gemma 3 270M instead (tools/fetch-model.sh lists them).
model:
	sh tools/fetch-model.sh $(MODEL)

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
$(BUILD)/kernels/backend.o: EXTRA_DEFS := -DMD_LIBDIR='"$(LIBDIR)"' -I$(BUILD)/gen

# The cuda backend's size and POSIX cksum CRC, which the program checks before it loads
# the shared object (a truncated one crashed dlopen with SIGBUS); 0 0 without one.
$(BUILD)/gen/cuda_plugin_sum.h: $(PROG_CU_LIB)
	@mkdir -p $(dir $@)
	@set -- $$($(if $(PROG_CU_LIB),cksum < $(PROG_CU_LIB),echo 0 0)); \
	  printf '#define MD_CUDA_PLUGIN_CRC %sU\n#define MD_CUDA_PLUGIN_SIZE %sULL\n' $$1 $$2 > $@
$(BUILD)/kernels/backend.o: $(BUILD)/gen/cuda_plugin_sum.h

install: $(BUILD)/multidecode $(PROG_CU_LIB)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DATADIR)
	install -m 755 $(BUILD)/multidecode $(DESTDIR)$(BINDIR)/multidecode
	$(if $(PROG_CU_LIB),install -d $(DESTDIR)$(LIBDIR) && install -m 755 $(PROG_CU_LIB) $(DESTDIR)$(LIBDIR)/)
	install -m 644 man/multidecode.1 $(DESTDIR)$(MANDIR)/man1/multidecode.1
	install -m 644 assets/keys $(DESTDIR)$(DATADIR)/keys

# uninstall: remove the files install wrote (and the data folder when empty).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/multidecode $(DESTDIR)$(MANDIR)/man1/multidecode.1 $(DESTDIR)$(DATADIR)/keys
	rm -f $(DESTDIR)$(LIBDIR)/multidecode-cuda.so
	-rmdir $(DESTDIR)$(DATADIR) $(DESTDIR)$(LIBDIR) 2>/dev/null

# clean: remove build outputs.
clean:
	rm -rf build build-asan build-isa multidecode multidecode-cuda.so

.PHONY: all deps test test-run test-isa isa-bins print-isa-tests cuda-check cuda-test gpu-pack gpu-pack-check asan soak fuzz fuzz-smoke fuzz-build fuzz-bins fuzz-seeds \
	model run bench clean install uninstall

-include $(LIB_OBJ:.o=.d) $(APP_OBJ:.o=.d) $(ISA_BIN:=.d) $(FUZZ_OBJ:.o=.d) $(FUZZ_NAMES:%=$(BUILD)/bin/fuzz_%.d)
