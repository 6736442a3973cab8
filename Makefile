# dlperf — one Makefile. It detects what is installed and says what it enabled.
#   make            build the library, the CLI and the tests with what is present
#   make run        install missing Debian packages, build, run the main job on the synthetic ImageNet
#   make test       install missing Debian packages, build, run every test, then the sanitizer build's tests
#   make asan       AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
# Switches: USE_DNNL=0 USE_CUDA=0 USE_MPI=0 USE_NCCL=0 USE_MHD=0, BUILD=dir, OPT=-O2, ARCH=-march=...

BUILD  ?= build
CC     ?= cc
PYTHON ?= /usr/bin/python3
OPT    ?= -O2
ARCH   ?= -march=native
SAN    ?=
# Compile jobs of the README's two commands (make run, make test): one per CPU unless -j is given.
JOBS   ?= $(shell nproc 2>/dev/null || echo 1)

have_pc   = $(shell pkg-config --exists $(1) 2>/dev/null && echo 1 || echo 0)
have_file = $(shell test -e $(1) && echo 1 || echo 0)

# CUDA: the toolkit (nvcc, cudart) in CUDA_HOME; cuDNN's headers and library may live elsewhere (CUDNN_INC,
# CUDNN_LIB: e.g. a pip package's nvidia/cudnn/{include,lib}); NCCL likewise (NCCL_INC, NCCL_LIB).
CUDA_HOME ?= /usr/local/cuda
CUDNN_INC ?= $(CUDA_HOME)/include
CUDNN_LIB ?= $(CUDA_HOME)/lib64
NCCL_INC  ?= $(CUDA_HOME)/include
NCCL_LIB  ?= $(CUDA_HOME)/lib64
# oneDNN 3.x (the cpu backend, written against its C API): PyPI's onednn-cpu-gomp + onednn-devel-cpu-gomp, which
# scripts/setup.sh installs into DNNL_PREFIX, or any oneDNN 3.x install (DNNL_PREFIX=/usr for a system one). Debian
# 12's libdnnl-dev is 2.x: not used. The binary finds libdnnl.so.3 through an rpath.
DNNL_PREFIX ?= $(CURDIR)/build-deps/onednn-3.2
DNNL_MAJOR := $(shell sed -n 's/^\#define DNNL_VERSION_MAJOR \([0-9]*\).*/\1/p' $(DNNL_PREFIX)/include/oneapi/dnnl/dnnl_version.h 2>/dev/null)
USE_DNNL  ?= $(if $(filter-out 0 1 2,$(DNNL_MAJOR)),1,0)
USE_MHD   ?= $(call have_pc,libmicrohttpd)
USE_MPI   ?= $(call have_pc,ompi-c)
USE_CUDA  ?= $(call have_file,$(CUDA_HOME)/bin/nvcc)
USE_CUDNN ?= $(if $(filter 1,$(USE_CUDA)),$(call have_file,$(CUDNN_INC)/cudnn.h),0)
USE_NCCL  ?= $(if $(filter 1,$(USE_CUDA)),$(call have_file,$(NCCL_INC)/nccl.h),0)
HAVE_CMOCKA := $(call have_pc,cmocka)

CFLAGS   := -std=c11 -D_GNU_SOURCE -g $(OPT) $(ARCH) -pthread -fopenmp -Wall -Wextra -Wshadow \
            -Wno-unused-parameter -Wno-format-truncation -Wmissing-prototypes -Wstrict-prototypes -Isrc $(SAN) $(EXTRA_CFLAGS)
LDFLAGS  := -Wl,--as-needed -pthread -fopenmp $(SAN) $(EXTRA_LDFLAGS)
LDLIBS   := -ljpeg -ljansson -lm -ldl

# Optional parts: a source file named *_<part>.c, or any file in a backend's folder src/backend/<part>/, is compiled
# only when that part is enabled (backend/cpu/ needs oneDNN; backend/cuda/ the toolkit and cuDNN).
SRC_ALL  := $(wildcard src/*/*.c src/*/*/*.c)
SRC_OFF  :=
ifeq ($(USE_DNNL),1)
  CFLAGS += -DDLP_HAVE_DNNL $(if $(filter /usr,$(DNNL_PREFIX)),,-I$(DNNL_PREFIX)/include)
  LDLIBS += $(if $(filter /usr,$(DNNL_PREFIX)),,-L$(DNNL_PREFIX)/lib -Wl,-rpath,$(DNNL_PREFIX)/lib) -l:libdnnl.so.3
else
  ifneq ($(origin USE_DNNL),command line)
    $(info oneDNN 3.x not found in $(DNNL_PREFIX) (scripts/setup.sh onednn installs it): building without the cpu backend)
  endif
  SRC_OFF += $(filter %_dnnl.c src/backend/cpu/%,$(SRC_ALL))
endif
ifeq ($(USE_MHD),1)
  CFLAGS += -DDLP_HAVE_MHD $(shell pkg-config --cflags libmicrohttpd)
  LDLIBS += $(shell pkg-config --libs libmicrohttpd)
else
  SRC_OFF += $(filter %_mhd.c,$(SRC_ALL))
endif
ifeq ($(USE_MPI),1)
  CFLAGS += -DDLP_HAVE_MPI
  MPI_CFLAGS := $(shell pkg-config --cflags ompi-c)
  LDLIBS += $(shell pkg-config --libs ompi-c)
else
  SRC_OFF += $(filter %_mpi.c,$(SRC_ALL))
endif
# The cuda backend (src/backend/cuda/, its *.cu) needs the toolkit and cuDNN. cuBLAS is not linked: the backend
# loads it with dlopen when a plan is made (libcublasLt alone costs every process ~0.1 s and 200 MB to map).
# backend/cuda/cuda_host*.c and cuda_alloc*.c are built in every build (host-side logic, and the pinned allocator with its
# pageable fallback); the folder's other files only with CUDA. The folder's files get the CUDA include path.
CU_SRC :=
CUDA_C_SRC := $(wildcard src/backend/cuda/*.c)
CUDA_C_ALWAYS := $(filter src/backend/cuda/cuda_host%.c src/backend/cuda/cuda_alloc%.c,$(CUDA_C_SRC))
ifeq ($(USE_CUDA)$(USE_CUDNN),11)
  CFLAGS += -DDLP_HAVE_CUDA -DDLP_HAVE_CUDNN
  CUDA_CFLAGS := -I$(CUDA_HOME)/include $(if $(filter-out $(CUDA_HOME)/include,$(CUDNN_INC)),-I$(CUDNN_INC)) \
                 -DDLP_CUDA_LIBDIR='"$(CUDA_HOME)/lib64"'
  LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++
  ifneq ($(CUDNN_LIB),$(CUDA_HOME)/lib64)
    LDLIBS += -L$(CUDNN_LIB) -Wl,-rpath,$(CUDNN_LIB)
  endif
  # pip's cuDNN ships only libcudnn.so.9 (no dev symlink)
  LDLIBS += $(if $(wildcard $(CUDNN_LIB)/libcudnn.so),-lcudnn,-l:libcudnn.so.9)
  CU_SRC := $(wildcard src/*/*.cu src/*/*/*.cu)
  ifeq ($(USE_NCCL),1)
    CFLAGS += -DDLP_HAVE_NCCL
    CUDA_CFLAGS += $(if $(filter-out $(CUDA_HOME)/include,$(NCCL_INC)),-I$(NCCL_INC))
    ifneq ($(NCCL_LIB),$(CUDA_HOME)/lib64)
      LDLIBS += -L$(NCCL_LIB) -Wl,-rpath,$(NCCL_LIB)
    endif
    LDLIBS += $(if $(wildcard $(NCCL_LIB)/libnccl.so),-lnccl,-l:libnccl.so.2)  # pip's NCCL has only the .so.2
  else
    SRC_OFF += $(filter %_nccl.c,$(SRC_ALL))
  endif
else
  ifeq ($(USE_CUDA),1)
    $(info CUDA found in $(CUDA_HOME) but no cuDNN ($(CUDNN_INC)/cudnn.h): building without the cuda backend)
  endif
  override USE_CUDA := 0
  override USE_CUDNN := 0
  override USE_NCCL := 0
  SRC_OFF += $(filter %_cuda.c %_cudnn.c %_nccl.c,$(SRC_ALL)) $(filter-out $(CUDA_C_ALWAYS),$(CUDA_C_SRC))
endif
NVCC      ?= $(CUDA_HOME)/bin/nvcc
# Hopper (H100/H200) machine code; sm_90a as the -gencode form (HOPPER.md: the -arch shorthand also runs a
# plain sm_90 pass). Add e.g. "-gencode=arch=compute_80,code=sm_80" to CUDA_ARCH for an A100.
CUDA_ARCH ?= -gencode=arch=compute_90a,code=sm_90a
NVCCFLAGS ?= -O3 -std=c++17 $(CUDA_ARCH) -lineinfo -Isrc $(if $(filter-out $(CUDA_HOME)/include,$(CUDNN_INC)),-I$(CUDNN_INC)) \
             -Xcompiler -fPIC,-Wall,-fno-exceptions -Xcudafe --display_error_number

SRC_LIB  := $(filter-out src/cli/% $(SRC_OFF),$(SRC_ALL))
SRC_CLI  := $(filter src/cli/%,$(filter-out $(SRC_OFF),$(SRC_ALL)))
OBJ_LIB  := $(SRC_LIB:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
OBJ_CLI  := $(SRC_CLI:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TEST_SUPPORT := $(filter-out $(TEST_SRC),$(wildcard tests/unit/*.c))
FUZZ_HARNESSES := safetensors profile catalog dataset_list jpeg serve http
FUZZ_LIB_SRC := $(FUZZ_HARNESSES:%=tests/fuzz/fuzz_%.c) tests/fuzz/fuzz_util.c
FUZZ_BIN := $(FUZZ_HARNESSES:%=$(BUILD)/tests/fuzz_%)

.PHONY: all lib cli tests setup setup-test run test test-fast asan check-asan clean config bench fuzz man install uninstall
all: config $(BUILD)/dlperf tests

config:
	@echo "dlperf build ($(BUILD)): oneDNN=$(USE_DNNL) libmicrohttpd=$(USE_MHD) MPI=$(USE_MPI) CUDA=$(USE_CUDA) cuDNN=$(USE_CUDNN) NCCL=$(USE_NCCL) cmocka=$(HAVE_CMOCKA)"

lib: $(BUILD)/libdlperf.a
$(BUILD)/libdlperf.a: $(OBJ_LIB)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/dlperf: $(OBJ_CLI) $(BUILD)/libdlperf.a
	$(CC) $(LDFLAGS) -o $@ $(OBJ_CLI) $(BUILD)/libdlperf.a $(LDLIBS)

$(BUILD)/src/%_mpi.o: src/%_mpi.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -MMD -MP -c $< -o $@
$(CUDA_C_SRC:%.c=$(BUILD)/%.o): CFLAGS += $(CUDA_CFLAGS)
$(BUILD)/src/%_cuda.o: src/%_cuda.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CUDA_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/src/%_cudnn.o: src/%_cudnn.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CUDA_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/src/%_nccl.o: src/%_nccl.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CUDA_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@
# the commit dlperf was built from (`dlperf version`, every result's "versions", the report): hw/host.o is rebuilt
# when it changes
GIT_COMMIT := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
$(BUILD)/git-commit.txt: FORCE
	@mkdir -p $(dir $@); echo '$(GIT_COMMIT)' | cmp -s - $@ || echo '$(GIT_COMMIT)' > $@
$(BUILD)/src/hw/host.o: $(BUILD)/git-commit.txt
$(BUILD)/src/hw/host.o: CFLAGS += -DDLP_GIT_COMMIT='"$(GIT_COMMIT)"'
.PHONY: FORCE
FORCE:
# the report page's script and style are built into report/assets.o (.incbin): rebuild it when they change
$(BUILD)/src/report/assets.o: src/report/report.js src/report/report.css
$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

ifeq ($(HAVE_CMOCKA),1)
tests: $(TEST_BIN)
$(BUILD)/tests/%: tests/unit/%.c $(TEST_SUPPORT) $(BUILD)/libdlperf.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit $(CUDA_CFLAGS) $(MPI_CFLAGS) -o $@ $< $(TEST_SUPPORT) $(TEST_EXTRA) $(BUILD)/libdlperf.a $(LDFLAGS) $(LDLIBS) -lcmocka
# The fuzz harnesses (tests/fuzz/): compiled into test_fuzz_corpus (replays every corpus) and into one plain replay
# program each, build/tests/fuzz_<name> (also the afl++ target: make fuzz).
$(BUILD)/tests/test_fuzz_corpus: TEST_EXTRA = -Itests/fuzz $(FUZZ_LIB_SRC)
$(BUILD)/tests/test_fuzz_corpus: $(FUZZ_LIB_SRC) tests/fuzz/fuzz.h
tests: $(FUZZ_BIN)
else
tests:
	@echo "cmocka not found: unit tests not built (scripts/setup.sh test installs it)"
endif

# Plain replay programs (tests/fuzz/main.c): build/tests/fuzz_<name> DIR|FILE... (fuzz_http runs fuzz_serve's engine)
$(BUILD)/tests/fuzz_http: FUZZ_USES = tests/fuzz/fuzz_serve.c
$(BUILD)/tests/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/main.c tests/fuzz/fuzz_util.c tests/fuzz/fuzz.h $(BUILD)/libdlperf.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/fuzz -DFUZZ_ENTRY=dlp_fuzz_$* -o $@ tests/fuzz/main.c $< $(FUZZ_USES) tests/fuzz/fuzz_util.c $(BUILD)/libdlperf.a $(LDFLAGS) $(LDLIBS)

-include $(OBJ_LIB:.o=.d) $(OBJ_CLI:.o=.d)

# --- install: the binary, the catalog it finds from its own location (../share/dlperf/catalog), the man page -----
# make install PREFIX=$HOME/.local (default /usr/local); DESTDIR for packaging. The man page is generated from the
# options tables (every command's --help) by tools/gen-man.sh.
PREFIX ?= /usr/local
DESTDIR ?=
man: $(BUILD)/dlperf.1
$(BUILD)/dlperf.1: $(BUILD)/dlperf tools/gen-man.sh
	tools/gen-man.sh $(BUILD)/dlperf > $@.tmp && mv $@.tmp $@

install: $(BUILD)/dlperf $(BUILD)/dlperf.1
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/dlperf/catalog $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/dlperf $(DESTDIR)$(PREFIX)/bin/dlperf
	install -m 644 catalog/*.json $(DESTDIR)$(PREFIX)/share/dlperf/catalog/
	install -m 644 $(BUILD)/dlperf.1 $(DESTDIR)$(PREFIX)/share/man/man1/dlperf.1
	@echo "installed: $(DESTDIR)$(PREFIX)/bin/dlperf, its catalog in $(DESTDIR)$(PREFIX)/share/dlperf/catalog, man dlperf"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/dlperf $(DESTDIR)$(PREFIX)/share/man/man1/dlperf.1
	rm -rf $(DESTDIR)$(PREFIX)/share/dlperf

# --- the two README commands -------------------------------------------------------------------------------
setup:
	@scripts/setup.sh build
setup-test:
	@scripts/setup.sh test

run: setup
	@$(MAKE) --no-print-directory -j$(JOBS) all
	$(BUILD)/dlperf run

test: setup-test
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@$(MAKE) --no-print-directory -j$(JOBS) asan-build
	tests/run.sh --build $(BUILD) --python $(PYTHON) --asan-build build-asan

# Quick loop for developers: no setup, no sanitizer pass, no long tests.
test-fast: all
	tests/run.sh --build $(BUILD) --python $(PYTHON) --quick

# ASan's fake stack (detect_stack_use_after_return) gives frames less than the 64-byte alignment GCC assumes when it
# zeroes a stack struct with an aligned zmm store (vmovdqa64): a SIGSEGV in the sanitizer build only (seen in
# run/train.c's setup). The sanitizer build is compiled without AVX-512 (data/resample.c's AVX-512 path is then
# checked by the normal build's tests only); oneDNN, a separate library, is unaffected.
asan-build:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 ARCH="$(ARCH) -mno-avx512f" \
	  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  USE_CUDA=0 $(if $(filter command line,$(origin USE_DNNL)),USE_DNNL=$(USE_DNNL)) all
asan: asan-build
	tests/run.sh --build build-asan --python $(PYTHON) --sanitizer

# Fuzzing (docs/fuzzing.md): the harnesses of tests/fuzz/ built with afl++ (afl-clang-fast, library included, in
# FUZZ_BUILD=build-afl/ without oneDNN, MPI and CUDA; libmicrohttpd in, for fuzz_http) and run FUZZ_S seconds each,
# FUZZ_JOBS at once; without afl++ the corpora are only replayed.
FUZZ_S    ?= 60
FUZZ_ONLY ?= $(FUZZ_HARNESSES)
FUZZ_JOBS ?= 1
FUZZ_BUILD ?= build-afl
AFL_CC    ?= afl-clang-fast
# Debian 12's afl++ is clang 14, which has no _Float16 on x86 (clang 15 has): its storage-only __fp16 converts the
# same way (core/tensor.h's f16 helpers). Debian's afl-gcc-fast does not load into Debian's own gcc 12 (version check).
AFL_CFLAGS ?= -D_Float16=__fp16 -Wno-unknown-warning-option -Wno-unknown-pragmas
fuzz:
	@if command -v $(AFL_CC) >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(AFL_CC) OPT=-O2 USE_DNNL=0 USE_MPI=0 USE_CUDA=0 \
	    EXTRA_CFLAGS="$(AFL_CFLAGS)" \
	    HAVE_CMOCKA=0 $(FUZZ_ONLY:%=$(FUZZ_BUILD)/tests/fuzz_%) && FUZZ_JOBS=$(FUZZ_JOBS) tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_S) $(FUZZ_ONLY); \
	else \
	  echo "$(AFL_CC) not found (apt-get install afl++): replaying the corpora only"; \
	  $(MAKE) --no-print-directory $(FUZZ_ONLY:%=$(BUILD)/tests/fuzz_%) && \
	  for h in $(FUZZ_ONLY); do DLPERF_ROOT=$(CURDIR) $(BUILD)/tests/fuzz_$$h tests/fuzz/corpus/$$h || exit 1; done; \
	fi

bench: all
	@echo "benchmarks: see bench/README.md (each script prints side-by-side figures and ratios)"

clean:
	rm -rf build build-asan build-afl
