# cleave - build, dependencies, tests, demo, benchmarks, sanitizers.
#
#   make          build ./build/cleave (installs missing Debian packages first)
#   make test     build and run every CUnit suite; non-zero exit on any failure
#   make demo     the main job on built-in defaults (writes demo/)
#   make bench    benchmarks, CSV into bench/
#   make asan     the test suites under AddressSanitizer + LeakSanitizer + UBSan
#   make ubsan    the test suites under UndefinedBehaviorSanitizer alone
#   make tsan     the test suites under ThreadSanitizer
#   make install PREFIX=/usr/local
#
# Every source folder's *.c goes into one static library; tools/cleave.c is
# the command's main and tests/*.c the test runner, both linked against it.

PREFIX  ?= /usr/local
BUILD   ?= build
CC      ?= cc
OPT     ?= -O2
SANFLAGS ?=
WERROR  ?=

# Debian packages cleave needs (see README, "Dependencies").
DEB_PKGS = libgsl-dev libcjson-dev libcunit1-dev libopenblas-dev zlib1g-dev \
           gnuplot-nox libopenmpi-dev openmpi-bin dataset-fashion-mnist pkg-config \
           libprotobuf-c-dev protobuf-c-compiler

# pkg-config answers when this Makefile is read, which on a fresh machine is
# before `deps` installed anything (and one missing .pc empties the whole
# answer).  So every target that compiles runs `deps` first and then a
# second make, which reads the Makefile again and asks pkg-config then; the
# compile rules also check (pkg-check) that every module was found.
PKG_MODULES = gsl libcjson openblas zlib ompi-c libprotobuf-c
PKG_CFLAGS := $(shell pkg-config --cflags $(PKG_MODULES) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKG_MODULES) 2>/dev/null)
# GSL's pkg-config pulls in its reference CBLAS; OpenBLAS must come first so
# its fast cblas_* win symbol resolution.
LIBS = -L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas $(PKG_LIBS) -lcunit -lpthread -lm

WARN   = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
         -Wpointer-arith -Wformat=2 -Wvla $(WERROR)
# -I. : headers of other folders are named from the repository root ("base/status.h").
CFLAGS_ALL = -std=c11 $(OPT) -g -D_GNU_SOURCE -MMD -MP -I. $(WARN) $(PKG_CFLAGS) \
             $(SANFLAGS) $(CFLAGS)
LDFLAGS_ALL = $(SANFLAGS) $(LDFLAGS)

# Short build lines; `make V=1` shows the full commands.
Q = $(if $(V),,@)
SAY = $(if $(V),@true,@echo)

# The folders in the order data flows, bottom layer first (docs/layout.md;
# tools/layering.sh checks that a folder includes only folders below it).
SRC_DIRS = base models profiles core sim exec/nn planner exec/ckpt exec/run exec/probe \
           bench tools
# tools/asan_defaults.c goes into each program rather than the library: a
# static library's member is linked only when something refers to it.
MAIN_SRC = tools/cleave.c tools/asan_defaults.c
LIB_SRC  = $(filter-out $(MAIN_SRC),$(wildcard $(addsuffix /*.c,$(SRC_DIRS))))
GP_TMPL  = $(wildcard tools/gnuplot/*.gp)
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/gp_templates.o $(BUILD)/gen/onnx_subset.pb-c.o
TEST_SRC = $(wildcard tests/*.c)
TEST_OBJ = $(TEST_SRC:%.c=$(BUILD)/%.o)

.PHONY: all deps pkg-check test test-run demo bench asan ubsan tsan install clean

all: deps
	@$(MAKE) --no-print-directory $(BUILD)/cleave

# Install only what is missing; nothing at all when everything is there.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "make deps: need root to install$$missing (hint: sudo make deps)" >&2; exit 2; fi; \
	  command -v apt-get >/dev/null || { echo "make deps: apt-get not found; install$$missing by hand" >&2; exit 2; }; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

# A compile without the flags of every module fails on a missing header far
# from the cause; say which module is missing instead.
pkg-check:
	@pkg-config --exists $(PKG_MODULES) 2>/dev/null || { \
	  pkg-config --print-errors --exists $(PKG_MODULES); \
	  echo "make: pkg-config does not find every library cleave needs (hint: make deps)" >&2; exit 2; }

$(BUILD)/libcleave.a: $(LIB_OBJ)
	@rm -f $@
	$(SAY) "  AR      $@"
	$(Q)ar rcs $@ $^

# gnuplot templates are compiled in (see tools/embed_templates.sh).
$(BUILD)/gen/gp_templates.c: $(GP_TMPL) tools/embed_templates.sh
	@mkdir -p $(dir $@)
	sh tools/embed_templates.sh $@ $(GP_TMPL)

$(BUILD)/gen/gp_templates.o: $(BUILD)/gen/gp_templates.c $(BUILD)/flags | pkg-check
	$(Q)$(CC) $(CFLAGS_ALL) -c $< -o $@

# `cleave import`'s ONNX decoder: our own subset of the ONNX schema
# (models/onnx/onnx_subset.proto) compiled by protoc-c; generated, not committed.
$(BUILD)/gen/onnx_subset.pb-c.c $(BUILD)/gen/onnx_subset.pb-c.h &: models/onnx/onnx_subset.proto
	@mkdir -p $(BUILD)/gen
	$(SAY) "  PROTOC  $<"
	$(Q)protoc-c --proto_path=models/onnx --c_out=$(BUILD)/gen $<

$(BUILD)/gen/onnx_subset.pb-c.o: $(BUILD)/gen/onnx_subset.pb-c.c $(BUILD)/flags | pkg-check
	$(Q)$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/models/onnx_import.o $(BUILD)/models/onnx_ops.o: $(BUILD)/gen/onnx_subset.pb-c.h
$(BUILD)/models/onnx_import.o $(BUILD)/models/onnx_ops.o: CFLAGS_ALL += -I$(BUILD)/gen

# Every object depends on the flags it was compiled with, kept in
# $(BUILD)/flags: a changed CC, OPT, SANFLAGS, WERROR or CFLAGS rebuilds the
# folder rather than linking objects compiled another way.  (Not CFLAGS_ALL
# itself: per-target additions to it would make the file's text depend on
# which object asked first.)
FLAGS_KEY = $(CC) | $(OPT) | $(SANFLAGS) | $(WERROR) | $(CFLAGS) | $(LDFLAGS) | $(FUZZ_NOCMP)
$(BUILD)/flags: FORCE
	@mkdir -p $(BUILD)
	@printf '%s\n' '$(FLAGS_KEY)' | cmp -s - $@ || printf '%s\n' '$(FLAGS_KEY)' >$@
FORCE:
.PHONY: FORCE

$(BUILD)/%.o: %.c $(BUILD)/flags | pkg-check
	@mkdir -p $(dir $@)
	$(SAY) "  CC      $<"
	$(Q)$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/cleave: $(BUILD)/tools/cleave.o $(BUILD)/tools/asan_defaults.o $(BUILD)/libcleave.a
	$(SAY) "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# The test runner's suite list is generated from the TEST_SUITE(name) lines
# in tests/*.c, so adding a suite never means editing a central list.
$(BUILD)/tests/suites.h: $(TEST_SRC)
	@mkdir -p $(dir $@)
	@grep -ho '^TEST_SUITE([a-z0-9_]*)' $(TEST_SRC) | sed 's/^TEST_SUITE/SUITE/' | sort > $@.tmp
	@cmp -s $@.tmp $@ && rm $@.tmp || mv $@.tmp $@

$(BUILD)/tests/main.o: $(BUILD)/tests/suites.h
$(BUILD)/tests/main.o: CFLAGS_ALL += -I$(BUILD)/tests

$(BUILD)/cleave_tests: $(TEST_OBJ) $(BUILD)/tools/asan_defaults.o $(BUILD)/libcleave.a
	$(SAY) "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

test: deps
	@sh tools/layering.sh
	@$(MAKE) --no-print-directory test-run

# Runs from the repository root so fixtures resolve; the CLI tests find the
# binary through CLEAVE_BIN.  SUITE=name runs one suite.
test-run: $(BUILD)/cleave $(BUILD)/cleave_tests
	CLEAVE_BIN=$(CURDIR)/$(BUILD)/cleave ./$(BUILD)/cleave_tests $(SUITE)

# -DCLEAVE_SANITIZED: the broad property tests draw fewer random instances
# in sanitizer builds (TEST_BREADTH in tests/test.h).
SAN_COMMON = -fno-omit-frame-pointer -fno-sanitize-recover=all -DCLEAVE_SANITIZED
# asan also checks LeakSanitizer in MPI ranks (tools/asan_defaults.c), and
# UBSan's checks in the same build: one run instead of two (CI's time).
# ubsan alone stays for a run without ASan's memory layout.
asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 \
	  SANFLAGS="-fsanitize=address,leak,undefined,float-cast-overflow $(SAN_COMMON)" test-run
	sh tools/asan_tls_check.sh build-asan
ubsan: deps
	@$(MAKE) --no-print-directory BUILD=build-ubsan OPT=-O1 \
	  SANFLAGS="-fsanitize=undefined,float-cast-overflow $(SAN_COMMON)" test-run
# ThreadSanitizer: the threads backend's workers, channels and signal flag
# (every suite runs, so also each `cleave` the CLI tests start); a report
# fails the process at once (halt_on_error, exit 66).
tsan: deps
	@TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 $(TSAN_OPTIONS)" \
	  $(MAKE) --no-print-directory BUILD=build-tsan OPT=-O1 \
	  SANFLAGS="-fsanitize=thread -fno-omit-frame-pointer -DCLEAVE_SANITIZED" test-run

demo: all
	./$(BUILD)/cleave demo

bench: all
	@mkdir -p bench/results
	./$(BUILD)/cleave bench --out bench/results

# Fuzzing (docs/testing.md): one libFuzzer binary per tests/fuzz/fuzz_*.c,
# built by clang into build-fuzz/ (library under fuzzer-no-link + ASan +
# UBSan); `make fuzz FUZZ_SECONDS=N` runs each N seconds via tools/fuzz.sh.
# Only these targets need clang and its libFuzzer runtime (libclang-rt-14-dev).
FUZZ_SECONDS ?= 60
FUZZ_SAN  = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_BINS = $(patsubst tests/fuzz/%.c,$(BUILD)/%,$(wildcard tests/fuzz/fuzz_*.c))
# exec/'s kernels use gcc vector built-ins clang lacks; of exec/ only the
# IDX reader (data.c) and the buffers it fills (tensor.c) are needed, and
# nothing above exec/ (bench/, tools/).
FUZZ_OBJ  = $(filter-out $(BUILD)/exec/% $(BUILD)/bench/%,$(LIB_OBJ)) \
            $(filter $(BUILD)/exec/nn/data.o $(BUILD)/exec/nn/tensor.o,$(LIB_OBJ))
.PHONY: fuzz fuzz-build fuzz-bins
.PRECIOUS: $(BUILD)/tests/fuzz/%.o
fuzz-build: deps
	@$(MAKE) --no-print-directory deps DEB_PKGS="clang libclang-rt-14-dev"
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang \
	  SANFLAGS="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" \
	  FUZZ_NOCMP=-fno-sanitize-coverage=trace-cmp fuzz-bins
# The planner and the simulator are built without libFuzzer's comparison
# tracing: the sim and search targets decode their bytes into choices, so
# no comparison there matches input bytes against a constant, and the
# tracing callbacks took two thirds of the search target's time (perf).
# The loaders keep it: it is how the fuzzer finds their keywords and limits.
FUZZ_NOCMP =
$(BUILD)/planner/%.o $(BUILD)/sim/%.o: CFLAGS_ALL += $(FUZZ_NOCMP)
fuzz-bins: $(FUZZ_BINS)
$(BUILD)/tests/fuzz/%.o: CFLAGS_ALL += -DCLEAVE_LIBFUZZER
# the fuzz_regress suite includes every target (tests/fuzz/targets.c), also
# ones added since it was last compiled
$(BUILD)/tests/test_fuzz_regress.o: $(wildcard tests/fuzz/*.c tests/fuzz/*.h)
$(BUILD)/libfuzzload.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/common.o $(BUILD)/libfuzzload.a
	$(CC) $(FUZZ_SAN) -fsanitize=fuzzer $(LDFLAGS) -o $@ $^ $(LIBS)
fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) sh tools/fuzz.sh build-fuzz

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/cleave/models \
	  $(DESTDIR)$(PREFIX)/share/cleave/profiles/clusters
	install -m 755 $(BUILD)/cleave $(DESTDIR)$(PREFIX)/bin/cleave
	install -m 644 models/*.json $(DESTDIR)$(PREFIX)/share/cleave/models/
	for d in models/hf/*/; do n=$$(basename $$d); \
	  install -d $(DESTDIR)$(PREFIX)/share/cleave/models/hf/$$n && \
	  install -m 644 $$d/config.json $(DESTDIR)$(PREFIX)/share/cleave/models/hf/$$n/ || exit 1; done
	install -m 644 profiles/*.json $(DESTDIR)$(PREFIX)/share/cleave/profiles/
	install -m 644 profiles/clusters/*.json $(DESTDIR)$(PREFIX)/share/cleave/profiles/clusters/

clean:
	rm -rf build build-asan build-ubsan build-tsan

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
