# mtrain — build, run, test, bench.
#   make            build ./mtrain (CPU backend; CUDA backend too when nvcc is found, CUDA=0 turns it off)
#   make run        install deps, build, fetch + preprocess the corpus, train configs/gpt-tiny.yaml, print a sample
#   make test       install deps, build, run every test (test/run.sh prints the summary)
#   make smoke      the gpt125m recipe as shipped (GPT-2 BPE, KJV corpus) at T 64 x batch 4 for a few iterations
#   make bench      benchmarks (printed tables)
#   make gpu-kit    gpu-kit/: the self-contained kit a lent GPU machine runs scripts/gpu-check.sh from
CC      ?= gcc
NVCC    ?= $(shell command -v nvcc 2>/dev/null || (test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc))
CUDA    ?= $(if $(NVCC),1,0)
BUILD   := build
OPT     ?= -O3 -march=native
PKGS    := yaml-0.1 openblas pmix
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# -fno-trapping-math: nothing here reads the floating-point exception flags (no fenv), and without it
# gcc keeps the clamps of the CPU backend's exp loops (GeLU, softmax, sigmoid) as branches and
# leaves those loops scalar ("control flow in loop"); values are unchanged (no reassociation)
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror $(OPT) -fno-trapping-math -g -fopenmp -I. $(PKG_CFLAGS)
LDLIBS  += $(PKG_LIBS) -fopenmp -lm -lpthread

# parallel/comm_nccl.c and parallel/cuda_module.c belong to the CUDA module, never to mtrain itself
MODULE_C_SRC := parallel/comm_nccl.c parallel/cuda_module.c
CORE_SRC := $(filter-out $(MODULE_C_SRC),$(sort $(wildcard core/*.c core/*/*.c parallel/*.c plan/*.c train/*.c)))
HDRS     := $(wildcard core/*.h core/*/*.h parallel/*.h plan/*.h train/*.h cmd/*.h)
CMD_SRC  := $(sort $(wildcard cmd/*.c))
# The CUDA backend is a module, build/libmtrain_cuda.so: the cuda/ objects and the NCCL
# communicator, linked against libcudart, libcublasLt and libnccl. mtrain links none of them; it
# opens the module (dlopen, core/backend_cuda_module.c) only for the CUDA backend, so the CPU path
# starts without loading CUDA. The module takes mt_errorf & co. from the executable, which exports
# its mt_* symbols for it (--export-dynamic-symbol); everything inside the module is hidden but its
# entry point.
ifeq ($(CUDA),1)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CU_SRC    := $(sort $(wildcard cuda/*.cu))
CU_OBJ    := $(CU_SRC:%.cu=$(BUILD)/%.o)
MODULE_C_OBJ := $(MODULE_C_SRC:%.c=$(BUILD)/module/%.o)
CUDA_MODULE := $(BUILD)/libmtrain_cuda.so
NVFLAGS   ?= -O2 -std=c++17 -I. -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90
NVFLAGS_MODULE = $(NVFLAGS) -Xcompiler -fPIC,-fvisibility=hidden
CFLAGS    += -DMT_HAVE_CUDA=1
MODULE_CFLAGS = $(CFLAGS) -fPIC -fvisibility=hidden -I$(CUDA_HOME)/include
MODULE_LIBS := -L$(CUDA_HOME)/lib64 -lcudart -lcublasLt -lnccl -lstdc++ -Wl,-rpath,$(CUDA_HOME)/lib64
LDLIBS    += -ldl '-Wl,--export-dynamic-symbol=mt_*'
else
CU_OBJ    :=
MODULE_C_OBJ :=
CUDA_MODULE :=
endif
# Gloo (Debian's libgloo-dev, C++): the network communicator for CPU ranks on several nodes
# (parallel/comm_gloo*.c over the C++ shim parallel/comm_gloo_shim.cc). Without its headers mtrain
# builds without it and a multi-node CPU run says what to install (GLOO=0 turns it off).
GLOO     ?= $(if $(wildcard /usr/include/gloo/context.h),1,0)
ifeq ($(GLOO),1)
CXX      ?= g++
GLOO_OBJ := $(BUILD)/parallel/comm_gloo_shim.o
GLOO_LIBS := -lgloo -lstdc++
$(BUILD)/parallel/comm_gloo.o $(BUILD)/parallel/comm_gloo_make.o: CFLAGS += -DMT_HAVE_GLOO=1
else
GLOO_OBJ :=
GLOO_LIBS :=
endif
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o) $(GLOO_OBJ)
LIB      := $(BUILD)/libmtrain.a

UNIT_SRC := $(sort $(wildcard test/unit/*.c test/ops/*.c))
UNIT_BIN := $(UNIT_SRC:%.c=$(BUILD)/%)
# the GPU GEMM benchmark: built with the tests because the GPU kit carries it (skips without a GPU)
GEMM_BENCH := $(BUILD)/test/bench_cuda_gemm

.PHONY: all deps run test smoke bench clean fuzz gpu-kit
all: mtrain $(CUDA_MODULE) $(UNIT_BIN) $(GEMM_BENCH)

# Every object depends on the flags it was built with: a `make CUDA=0` build followed by `make`
# (or another OPT) rebuilds everything instead of linking stale objects (make tracks files, not
# flags). The stamp is rewritten only when the flags change.
FLAGS_STAMP := $(BUILD)/.build-flags
FLAGS_NOW := CC=$(CC) CFLAGS=$(CFLAGS) CUDA=$(CUDA) NVFLAGS=$(NVFLAGS) LDLIBS=$(LDLIBS) GLOO=$(GLOO)
$(shell mkdir -p $(BUILD) && { [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" = "$(FLAGS_NOW)" ] || printf '%s\n' "$(FLAGS_NOW)" >$(FLAGS_STAMP); })

$(BUILD)/%.o: %.c $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# the batched normal draws vectorise only when sqrt need not set errno (its argument is never negative)
$(BUILD)/core/rng_normal_fill.o: CFLAGS += -fno-math-errno

$(BUILD)/cuda/%.o: cuda/%.cu $(wildcard cuda/*.cuh core/*.h) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS_MODULE) -c $< -o $@

$(BUILD)/module/%.o: %.c $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(MODULE_CFLAGS) -c $< -o $@

# build/.module-libs: the link line that worked, for scripts/gpu-kit.sh's prebuilt module
$(CUDA_MODULE): $(CU_OBJ) $(MODULE_C_OBJ)
	$(CC) -shared -o $@ $^ $(MODULE_LIBS)
	@printf '%s\n' '$(MODULE_LIBS)' >$(BUILD)/.module-libs

ifeq ($(GLOO),1)
$(GLOO_OBJ): parallel/comm_gloo_shim.cc parallel/comm_gloo_shim.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -Wall -Wextra -Werror -I. -c $< -o $@
endif

$(LIB): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

mtrain: $(CMD_SRC:%.c=$(BUILD)/%.o) $(LIB) | $(CUDA_MODULE)
	$(CC) $(CFLAGS) -o $@ $(CMD_SRC:%.c=$(BUILD)/%.o) $(LIB) $(GLOO_LIBS) $(LDLIBS)

# a test is rebuilt when any test header changes: test/*.h and the shared ones in test/{unit,ops}/, and
# the fuzz harnesses the corpus replays #include (test/fuzz/*.c, *.h)
$(BUILD)/test/%: test/%.c $(LIB) $(wildcard test/*.h test/unit/*.h test/ops/*.h test/fuzz/*.h test/fuzz/*.c) | $(CUDA_MODULE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(GLOO_LIBS) $(LDLIBS)

# a test binary whose test/{unit,ops}/NAME.c was deleted or renamed is removed (test/run.sh skips it too)
STALE_TEST_BIN := $(filter-out $(UNIT_BIN),$(wildcard $(BUILD)/test/unit/* $(BUILD)/test/ops/*))
.PHONY: prune-test-bins
all: prune-test-bins
prune-test-bins:
	$(if $(STALE_TEST_BIN),rm -f $(STALE_TEST_BIN))

deps:
	@./scripts/install-deps.sh

# `make run` — the README's first command: trains gpt-tiny long enough that its sample reads as
# King James prose (2000 iterations at lr 3e-3 reach a validation loss of ~1.4 nats per byte; the
# recipe's own 300 are the CI smoke length), saves it in runs/gpt-tiny and prints a sample.
RUN_TRAIN ?= --train-iters 2000 --lr 3e-3 --lr-warmup-iters 50 --eval-interval 500
run: deps
	@$(MAKE) --no-print-directory all
	@./scripts/fetch-corpus.sh data
	./mtrain --config configs/gpt-tiny.yaml $(RUN_TRAIN) --save runs/gpt-tiny
	@echo "make run: a sample from the model it trained (mtrain generate, seed 1234):"
	@./mtrain generate --config configs/gpt-tiny.yaml --load runs/gpt-tiny --prompt "And God said" \
		--max-new-tokens 110 --temperature 0.7 --top-k 40

# `make test` — the README's second command; .ci/run calls exactly this.
# the build in parallel (CI's `make test` is given no -j; a 2-core runner builds in about half the time)
test: deps
	@$(MAKE) --no-print-directory -j$$(nproc 2>/dev/null || echo 2) all
	@./scripts/fetch-corpus.sh data
	@./scripts/fetch-gpt2-tokenizer.sh data || echo "make test: GPT-2 tokenizer files unavailable (npm?): their tests will skip"
	@./scripts/fetch-llama3-tokenizer.sh data || echo "make test: Llama-3 tokenizer files unavailable (npm/node?): their tests will skip"
	@./scripts/fetch-llama2-tokenizer.sh data || echo "make test: Llama-2 tokenizer files unavailable (npm/node?): their tests will skip"
	@./test/run.sh

# `make smoke` — the CI smoke run with a 125M config; `make test` runs the same script
smoke: deps
	@$(MAKE) --no-print-directory all
	@./scripts/fetch-corpus.sh data
	@bash test/e2e/smoke_gpt125m.sh

bench: deps
	@$(MAKE) --no-print-directory all
	@./scripts/fetch-corpus.sh data
	@./test/bench.sh
	@./test/bench_start.sh
	@./test/bench_seq.sh
	@$(MAKE) --no-print-directory $(BUILD)/test/bench_attention && ./$(BUILD)/test/bench_attention
	@./$(GEMM_BENCH) || [ $$? -eq 77 ]
	@./test/bench_data.sh
	@./test/bench_tp.sh
	@./test/bench_cp.sh
	@if [ -x test/bench_pp.sh ]; then ./test/bench_pp.sh; fi
	@./test/bench_ckpt.sh
	@./test/bench_moe.sh
	@./test/bench_overlap.sh
	@./test/bench_plan.sh
	@./test/bench_multinode.sh

fuzz:
	@./test/fuzz/run-fuzzer.sh

# `make gpu-kit` — gpu-kit/: what a lent GPU machine runs scripts/gpu-check.sh from (host binaries
# built for any x86-64-v3 CPU, their Debian libraries, data, the CUDA sources; README, "Checking a
# GPU machine")
gpu-kit: all
	@./scripts/fetch-corpus.sh data
	@./scripts/fetch-gpt2-tokenizer.sh data
	@./scripts/gpu-kit.sh

clean:
	rm -rf $(BUILD) mtrain
