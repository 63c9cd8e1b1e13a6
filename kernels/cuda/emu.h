/* emu.h - the project's CUDA-on-CPU emulation, so that the .cu kernels of kernels/cuda/
 * run (and are tested) on machines without a GPU. Under nvcc this header only defines the
 * launch and dynamic-shared-memory macros; under a plain C++17 compiler it is a small CUDA
 * of its own, with no dependency.
 *
 * How it runs a launch: one block at a time, blocks in x, y, z order; every CUDA thread of
 * the block is a user-level fiber (a hand-written register switch on x86-64, ucontext
 * elsewhere: glibc's swapcontext makes a signal-mask system call per switch, 30 times the
 * cost) with a 64 KiB stack (256 KiB under ASan, with
 * a guard page below; stacks are reused across blocks and launches). A fiber runs until
 * it exits or waits at __syncthreads or at a warp operation, then the next one runs. The
 * emulator is strict where CUDA leaves behaviour undefined, and aborts with a message
 * naming the kernel:
 *   - __syncthreads is a counted barrier that every thread of the block must reach at the
 *     same call site; one that exited or waits elsewhere is a divergent barrier.
 *   - warps are 32 consecutive threads (x fastest); __shfl*_sync and __syncwarp need every
 *     lane named in the mask to call the same operation with the same mask, the caller's
 *     own lane in it, and a source lane inside the mask.
 *   - __shared__ variables (in an ELF section of their own) and the dynamic shared memory
 *     are filled before every block with 32-bit words 0xFFA5A5A5 (a NaN as a float, bytes
 *     A5 A5 A5 FF), so a read of shared memory nobody wrote shows up.
 * Atomics are plain read-modify-writes: fibers switch only at barriers and warp
 * operations. The runtime API's memory, stream and error calls that host code needs are
 * here too (at the end), synchronous, and stream capture with graphs (emu_graph.h).
 * Blocks never run side by side, so a kernel that waits for another block (a grid-wide
 * spin) hangs here; none of ours does. Device memory is host memory.
 *
 * Kernels declare dynamic shared memory with CU_DYN_SHARED(type, name) and are launched
 * with CU_LAUNCH(kernel, grid, block, smem, stream, args...), the same text for nvcc
 * (where it is <<<grid, block, smem, stream>>>) and for the emulator. The emulator keeps
 * its state in globals (the running block, the fibers): CUDA's threadIdx and blockIdx are
 * globals in spirit, and a launch is not reentrant (nor thread-safe: one host thread
 * launches at a time). */
#ifndef MD_CUDA_EMU_H
#define MD_CUDA_EMU_H

#if defined(__CUDACC__)

#include <cuda_runtime.h>

#define CU_EMU 0
#define CU_LAUNCH(kern, grid, block, smem, stream, ...)                                    \
    kern<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
#define CU_DYN_SHARED(type, name)                                                          \
    extern __shared__ __align__(16) unsigned char cu_dyn_smem_[];                          \
    type *name = reinterpret_cast<type *>(cu_dyn_smem_)

#else /* the emulator */

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <new>
#include <tuple>
#include <type_traits>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define CUEMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUEMU_ASAN 1
#endif
#endif
#ifdef CUEMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#define CU_EMU 1

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x, y, z;
};
typedef struct CUstream_st *cudaStream_t;
/* a stream: while it captures (cudaStreamBeginCapture), the graph nodes it records */
struct CUstream_st {
    std::vector<std::function<void()>> *rec;
};

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static __attribute__((section("cuemu_shared"), aligned(16)))
#define warpSize 32

#define CU_DYN_SHARED(type, name) type *name = reinterpret_cast<type *>(cuemu::st.dyn_smem)
#define CU_LAUNCH(kern, grid, block, smem, stream, ...)                                    \
    cuemu::launch(#kern, dim3(grid), dim3(block), (size_t)(smem), (stream), kern, __VA_ARGS__)

/* every __shared__ variable of the program lies between these (the linker defines them
 * when the section exists; weak, so a program without any is fine) */
extern "C" char __start_cuemu_shared[] __attribute__((weak));
extern "C" char __stop_cuemu_shared[] __attribute__((weak));

namespace cuemu {

constexpr int WARP = 32;
constexpr uint32_t POISON = 0xFFA5A5A5u;
#ifdef CUEMU_ASAN
constexpr size_t STACK = 256 << 10;
#else
constexpr size_t STACK = 64 << 10;
#endif

enum fstate { READY, AT_BARRIER, AT_WARP, DONE };
enum wop { W_SHFL, W_SYNCWARP };

/* A fiber's saved machine state: on x86-64 its stack pointer (the callee-saved registers
 * and the resume address lie on its stack), elsewhere a ucontext. */
#if defined(__x86_64__)
#define CUEMU_FAST_SWITCH 1
struct fctx {
    void *sp;
};
/* Saves the callee-saved registers on the current stack, stores the stack pointer in
 * *from, loads to and returns into what it saved (a weak symbol: every translation unit
 * that includes this header defines the same one). */
extern "C" void cuemu_switch(void **from, void *to);
asm(".text\n"
    ".weak cuemu_switch\n"
    ".type cuemu_switch, @function\n"
    "cuemu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size cuemu_switch, .-cuemu_switch\n");
#else
struct fctx {
    ucontext_t uc;
};
#endif

struct fiber {
    fctx ctx;
    char *stack; /* usable part, STACK bytes above a guard page */
    uint3 tid;
    fstate state;
    const char *name, *file; /* where it waits (name: the warp operation) */
    int line;
    wop op;
    unsigned mask;
    int src;            /* lane whose value it reads; -1: its own */
    uint64_t val, result;
    void *fake_stack;   /* ASan's bookkeeping for this fiber's stack */
};

struct state {
    const char *kernel;   /* the running launch's kernel, NULL between launches */
    std::function<void()> body;
    dim3 grid, block;
    uint3 block_idx;
    std::vector<fiber> fibers; /* the stacks persist; the rest is reset per block */
    /* per warp of the running block, a bit a lane: waiting in a warp operation, exited */
    std::vector<uint32_t> warp_wait, warp_done;
    fiber *cur;
    fctx sched;
    void *sched_fake;
    const void *sched_bottom;
    size_t sched_size;
    unsigned char *dyn_smem;
    size_t dyn_bytes, dyn_cap;
};
inline state st;

#define threadIdx (cuemu::st.cur->tid)
#define blockIdx (cuemu::st.block_idx)
#define blockDim (cuemu::st.block)
#define gridDim (cuemu::st.grid)

/* The rest of an abort's message (after its prefix), then the abort. */
[[noreturn]] inline void fail_rest(const char *fmt, va_list ap) {
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    abort();
}

[[noreturn]] __attribute__((format(printf, 1, 2))) inline void fail(const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "cuda emulator: kernel %s, block (%u,%u,%u): ", st.kernel ? st.kernel : "?",
            st.block_idx.x, st.block_idx.y, st.block_idx.z);
    va_list ap;
    va_start(ap, fmt);
    fail_rest(fmt, ap);
}

inline int n_threads() { return (int)(st.block.x * st.block.y * st.block.z); }
inline int lane_of(const fiber *f) { return (int)(f - st.fibers.data()) % WARP; }

/* ---- switching: the scheduler and the fibers, with ASan told about each stack switch */

inline void switch_to(fctx *from, fctx *to) {
#ifdef CUEMU_FAST_SWITCH
    cuemu_switch(&from->sp, to->sp);
#else
    if (swapcontext(&from->uc, &to->uc) != 0) fail("swapcontext failed");
#endif
}

inline void to_fiber(fiber *f) {
    st.cur = f;
#ifdef CUEMU_ASAN
    __sanitizer_start_switch_fiber(&st.sched_fake, f->stack, STACK);
#endif
    switch_to(&st.sched, &f->ctx);
#ifdef CUEMU_ASAN
    __sanitizer_finish_switch_fiber(st.sched_fake, nullptr, nullptr);
#endif
}

/* Back to the scheduler from the running fiber (which has set its state). */
inline void to_sched() {
    fiber *f = st.cur;
#ifdef CUEMU_ASAN
    /* a finished fiber's fake stack is dropped (nullptr), a waiting one's kept */
    __sanitizer_start_switch_fiber(f->state == DONE ? nullptr : &f->fake_stack,
                                   st.sched_bottom, st.sched_size);
#endif
    switch_to(&f->ctx, &st.sched);
#ifdef CUEMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake_stack, nullptr, nullptr);
#endif
}

inline void fiber_main() {
#ifdef CUEMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &st.sched_bottom, &st.sched_size);
#endif
    st.body();
    st.cur->state = DONE;
    st.warp_done[(size_t)(st.cur - st.fibers.data()) / WARP] |= 1u << lane_of(st.cur);
    to_sched();
    fail("a finished thread was resumed");
}

/* ---- shared memory poison ---- */

/* Fills [p, p + bytes) with the poison words, a word at a time (it runs before every
 * block: byte by byte it was most of an emulated test's time). Not instrumented: the
 * __shared__ section holds ASan's redzones between the variables, which nobody reads. */
__attribute__((no_sanitize("address"))) inline void poison(void *p, size_t bytes) {
    unsigned char *b = (unsigned char *)p;
    const uint32_t w = POISON;
    size_t i = 0;
    for (; i + 4 <= bytes; i += 4) memcpy(b + i, &w, 4);
    for (; i < bytes; i++) b[i] = (unsigned char)(w >> 8 * (i % 4));
}

/* Aborts unless every lane of f's mask that waits in a warp operation waits in f's, with
 * f's mask (warp: f's lane 0). */
inline void warp_agree(const fiber *f, const fiber *warp) {
    for (int l = 0; l < WARP; l++) {
        if (!(f->mask >> l & 1)) continue;
        const fiber &o = warp[l];
        if (o.state != AT_WARP || (o.mask == f->mask && o.op == f->op)) continue;
        fail("%s at %s:%d (lane %d, mask 0x%08x) meets lane %d in another warp operation "
             "(%s:%d, mask 0x%08x)",
             f->name, f->file, f->line, lane_of(f), f->mask, l, o.file, o.line, o.mask);
    }
}

/* ---- the block barrier ---- */

inline void syncthreads(const char *file, int line) {
    fiber *f = st.cur;
    f->state = AT_BARRIER;
    f->file = file;
    f->line = line;
    to_sched();
}

/* Called when no fiber is ready and some have not finished: releases a barrier every
 * thread reached at one call site, else aborts describing who waits where. */
inline void stalled() {
    const int n = n_threads();
    fiber *first = nullptr;
    int at_bar = 0, done = 0, same = 0;
    for (fiber &f : st.fibers) {
        if (&f - st.fibers.data() >= n) break;
        if (f.state == DONE) done++;
        if (f.state != AT_BARRIER) continue;
        if (!first) first = &f;
        at_bar++;
        same += f.line == first->line && strcmp(f.file, first->file) == 0;
    }
    if (first && at_bar == n && same == n) {
        for (int i = 0; i < n; i++) st.fibers[i].state = READY;
        return;
    }
    for (int i = 0; i < n && !first; i++) { /* lanes of one mask at different operations */
        const fiber &f = st.fibers[i];
        if (f.state == AT_WARP) warp_agree(&f, st.fibers.data() + i - lane_of(&f));
    }
    for (int i = 0; i < n; i++) { /* a warp operation that never completed */
        const fiber &f = st.fibers[i];
        if (f.state == AT_WARP && !first)
            fail("thread %d waits in a warp operation (%s:%d, mask 0x%08x) for lanes that "
                 "exited or never call it",
                 i, f.file, f.line, f.mask);
    }
    if (!first) fail("stalled with no thread at a barrier (emulator bug)");
    for (int i = 0; i < n; i++) {
        const fiber &f = st.fibers[i];
        if (f.state == AT_BARRIER && (f.line != first->line || strcmp(f.file, first->file)))
            fail("divergent __syncthreads: thread %d waits at %s:%d, thread %d at %s:%d",
                 (int)(first - st.fibers.data()), first->file, first->line, i, f.file, f.line);
    }
    fail("divergent __syncthreads at %s:%d: reached by %d of %d threads (%d exited, %d in a "
         "warp operation)",
         first->file, first->line, at_bar, n, done, n - at_bar - done);
}

/* ---- warp operations ---- */

/* Completes the operation of the running fiber's group when every lane of its mask has
 * posted; else parks the fiber until the last lane does. Returns the fiber's result. A
 * warp's waiting and exited lanes are bit masks, so a lane's arrival costs a few
 * operations and the group is checked once, when it completes (or at a stall). */
inline uint64_t warp_op(wop op, unsigned mask, int src, uint64_t val, const char *name,
                        const char *file, int line) {
    fiber *f = st.cur;
    const int lane = lane_of(f);
    fiber *warp = f - lane;
    const int base = (int)(warp - st.fibers.data());
    const int n_lanes = n_threads() - base < WARP ? n_threads() - base : WARP;
    if (!(mask >> lane & 1))
        fail("%s at %s:%d: lane %d calls it with mask 0x%08x, which leaves the lane out", name,
             file, line, lane, mask);
    if (n_lanes < WARP && mask >> n_lanes)
        fail("%s at %s:%d: mask 0x%08x names lanes this warp lacks (it has %d)", name, file,
             line, mask, n_lanes);
    if (src >= 0 && !(mask >> src & 1))
        fail("%s at %s:%d: lane %d reads lane %d, outside mask 0x%08x", name, file, line, lane,
             src, mask);
    uint32_t &wait = st.warp_wait[(size_t)base / WARP];
    const uint32_t done = st.warp_done[(size_t)base / WARP] & mask;
    if (done)
        fail("%s at %s:%d: mask 0x%08x names lane %d, which has exited", name, file, line, mask,
             __builtin_ctz(done));
    f->op = op;
    f->name = name;
    f->mask = mask;
    f->src = src;
    f->val = val;
    f->file = file;
    f->line = line;
    f->state = AT_WARP;
    wait |= 1u << lane;
    if ((wait & mask) != mask) {
        to_sched();
        return f->result;
    }
    warp_agree(f, warp);
    for (int l = 0; l < n_lanes; l++) {
        if (!(mask >> l & 1)) continue;
        fiber &o = warp[l];
        o.result = o.src < 0 ? o.val : warp[o.src].val;
        o.state = READY;
    }
    wait &= ~mask;
    return f->result;
}

template <class T> inline uint64_t bits(T v) {
    static_assert(sizeof(T) <= 8, "a shuffled value is at most 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}
template <class T> inline T unbits(uint64_t u) {
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* The lane read by a shuffle within segments of width lanes: segment start + s, or -1
 * (its own value) when s falls outside the caller's segment. */
inline int seg_lane(int lane, int width, int s, const char *name) {
    if (width <= 0 || width > WARP || (width & (width - 1)))
        fail("%s: width %d is not a power of two up to 32", name, width);
    const int start = lane & ~(width - 1);
    return s >= 0 && s < width ? start + s : -1;
}

/* ---- launch ---- */

inline void make_fiber(fiber *f) {
    if (!f->stack) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        void *m = mmap(nullptr, STACK + page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) fail("no memory for a thread's stack");
        mprotect(m, page, PROT_NONE); /* an overflow faults instead of corrupting */
        f->stack = (char *)m + page;
    }
#ifdef CUEMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(f->stack, STACK);
#endif
#ifdef CUEMU_FAST_SWITCH
    /* what cuemu_switch pops: six zeroed registers, then fiber_main as the return address,
     * above it a null return address of fiber_main's own (which never returns), placed so
     * that fiber_main starts with the stack aligned as after a call */
    void **top = (void **)(f->stack + STACK);
    top[-1] = nullptr;
    top[-2] = (void *)&fiber_main;
    for (int i = 3; i <= 8; i++) top[-i] = nullptr;
    f->ctx.sp = top - 8;
#else
    if (getcontext(&f->ctx.uc) != 0) fail("getcontext failed");
    f->ctx.uc.uc_stack.ss_sp = f->stack;
    f->ctx.uc.uc_stack.ss_size = STACK;
    f->ctx.uc.uc_link = nullptr;
    makecontext(&f->ctx.uc, fiber_main, 0);
#endif
    f->state = READY;
    f->fake_stack = nullptr;
}

inline void run_block() {
    const int n = n_threads();
    if (__start_cuemu_shared && __stop_cuemu_shared)
        poison(__start_cuemu_shared, (size_t)(__stop_cuemu_shared - __start_cuemu_shared));
    poison(st.dyn_smem, st.dyn_bytes);
    st.warp_wait.assign((size_t)(n + WARP - 1) / WARP, 0);
    st.warp_done.assign((size_t)(n + WARP - 1) / WARP, 0);
    for (int i = 0; i < n; i++) {
        fiber *f = &st.fibers[i];
        make_fiber(f);
        f->tid = uint3{(unsigned)i % st.block.x, (unsigned)i / st.block.x % st.block.y,
                       (unsigned)i / (st.block.x * st.block.y)};
    }
    for (;;) {
        bool ran = false, all_done = true;
        for (int i = 0; i < n; i++) {
            if (st.fibers[i].state == READY) {
                to_fiber(&st.fibers[i]);
                ran = true;
            }
            all_done = all_done && st.fibers[i].state == DONE;
        }
        if (all_done) return;
        if (!ran) stalled();
    }
}

/* Runs body as kernel `name` over grid x block, with smem bytes of dynamic shared
 * memory. Returns when every block has finished (launches are synchronous here). */
inline void run(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                std::function<void()> body) {
    (void)stream;
    if (st.kernel) fail("launch of %s from inside a kernel", name);
    st.kernel = name;
    st.block_idx = uint3{0, 0, 0};
    const long n = (long)block.x * block.y * block.z;
    if (n < 1 || n > 1024 || block.z > 64)
        fail("block (%u,%u,%u) has %ld threads; CUDA allows 1 to 1024", block.x, block.y,
             block.z, n);
    if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.y > 65535 || grid.z > 65535)
        fail("grid (%u,%u,%u) is out of CUDA's range", grid.x, grid.y, grid.z);
    if (smem > 227 << 10) fail("%zu bytes of dynamic shared memory (most: 227 KiB)", smem);
    if (st.fibers.size() < (size_t)n) st.fibers.resize((size_t)n); /* stacks: none yet */
    if (smem > st.dyn_cap) {
        free(st.dyn_smem);
        st.dyn_smem = (unsigned char *)aligned_alloc(64, (smem + 63) / 64 * 64);
        if (!st.dyn_smem) fail("no memory for %zu bytes of shared memory", smem);
        st.dyn_cap = smem;
    }
    st.dyn_bytes = smem;
    st.grid = grid;
    st.block = block;
    st.body = std::move(body);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                st.block_idx = uint3{x, y, z};
                run_block();
            }
    st.body = nullptr;
    st.cur = nullptr;
    st.kernel = nullptr;
}

/* ---- stream capture: a capturing stream records its work as graph nodes ---- */

/* streams capturing now: CUDA's global capture mode fails a synchronous call meanwhile */
inline int n_capturing;

[[noreturn]] __attribute__((format(printf, 1, 2))) inline void host_fail(const char *fmt, ...) {
    fflush(stdout);
    fputs("cuda emulator: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    fail_rest(fmt, ap);
}

/* A synchronous call (copy, allocation, synchronisation): fails during a capture, as
 * CUDA fails it and invalidates the capture. */
inline void no_capture(const char *call) {
    if (n_capturing) host_fail("%s during a stream capture (CUDA fails it: a synchronous call)", call);
}

/* Work queued on stream s: true when s captures and has recorded it as a node (not run);
 * work on the legacy default stream during a capture fails (it would join the capture). */
inline bool record(cudaStream_t s, std::function<void()> node, const char *what) {
    if (s && s->rec) {
        s->rec->push_back(std::move(node));
        return true;
    }
    if (!s && n_capturing) host_fail("%s on the legacy default stream during a stream capture", what);
    return false;
}

/* kernels run so far, launched or replayed from a graph (cu_emu_launches) */
inline uint64_t n_launches;

/* CU_LAUNCH's emulated form: the arguments are converted to the kernel's parameter types
 * once, as CUDA does, and every thread gets its own copy of them. */
template <class... P, class... A>
inline void launch(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   void (*kern)(P...), A &&...a) {
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with a wrong argument count");
    std::tuple<std::decay_t<P>...> args(std::forward<A>(a)...);
    /* a captured launch keeps its own copy of the arguments, as a kernel node does */
    auto node = [=] {
        n_launches++;
        run(name, grid, block, smem, stream, [&] { std::apply(kern, args); });
    };
    if (!record(stream, node, name)) node();
}

} /* namespace cuemu */

/* ---- the CUDA device API ------------------------------------------------------------ */

inline void __syncthreads(const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    cuemu::syncthreads(file, line);
}

inline void __syncwarp(unsigned mask = 0xffffffffu, const char *file = __builtin_FILE(),
                       int line = __builtin_LINE()) {
    cuemu::warp_op(cuemu::W_SYNCWARP, mask, -1, 0, "__syncwarp", file, line);
}

template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32,
                     const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    const int lane = cuemu::lane_of(cuemu::st.cur);
    int src = cuemu::seg_lane(lane, width, ((src_lane % width) + width) % width, "__shfl_sync");
    return cuemu::unbits<T>(cuemu::warp_op(cuemu::W_SHFL, mask, src, cuemu::bits(var),
                                           "__shfl_sync", file, line));
}

template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32,
                         const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    const int lane = cuemu::lane_of(cuemu::st.cur);
    const int start = cuemu::seg_lane(lane, width, 0, "__shfl_xor_sync"), s = lane ^ lane_mask;
    /* CUDA: a lane may read earlier segments but gets its own value for later ones */
    const int src = s < 0 || s >= start + width ? -1 : s;
    return cuemu::unbits<T>(cuemu::warp_op(cuemu::W_SHFL, mask, src, cuemu::bits(var),
                                           "__shfl_xor_sync", file, line));
}

template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32,
                          const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    const int lane = cuemu::lane_of(cuemu::st.cur);
    const int start = lane & ~(width - 1);
    int src = cuemu::seg_lane(lane, width, lane - start + (int)delta, "__shfl_down_sync");
    return cuemu::unbits<T>(cuemu::warp_op(cuemu::W_SHFL, mask, src, cuemu::bits(var),
                                           "__shfl_down_sync", file, line));
}

template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32,
                        const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    const int lane = cuemu::lane_of(cuemu::st.cur);
    const int start = lane & ~(width - 1);
    int src = cuemu::seg_lane(lane, width, lane - start - (int)delta, "__shfl_up_sync");
    return cuemu::unbits<T>(cuemu::warp_op(cuemu::W_SHFL, mask, src, cuemu::bits(var),
                                           "__shfl_up_sync", file, line));
}

/* Atomics: fibers never switch inside one, so a plain read-modify-write is atomic. */
template <class T> inline T __cuemu_atomic_add(T *p, T v) {
    T old = *p;
    *p = old + v;
    return old;
}
inline int atomicAdd(int *p, int v) { return __cuemu_atomic_add(p, v); }
inline unsigned atomicAdd(unsigned *p, unsigned v) { return __cuemu_atomic_add(p, v); }
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __cuemu_atomic_add(p, v);
}
inline float atomicAdd(float *p, float v) { return __cuemu_atomic_add(p, v); }
inline double atomicAdd(double *p, double v) { return __cuemu_atomic_add(p, v); }
template <class T> inline T __cuemu_atomic_max(T *p, T v) {
    T old = *p;
    *p = v > old ? v : old;
    return old;
}
template <class T> inline T __cuemu_atomic_min(T *p, T v) {
    T old = *p;
    *p = v < old ? v : old;
    return old;
}
inline int atomicMax(int *p, int v) { return __cuemu_atomic_max(p, v); }
inline unsigned atomicMax(unsigned *p, unsigned v) { return __cuemu_atomic_max(p, v); }
inline long long atomicMax(long long *p, long long v) { return __cuemu_atomic_max(p, v); }
inline int atomicMin(int *p, int v) { return __cuemu_atomic_min(p, v); }
inline unsigned atomicMin(unsigned *p, unsigned v) { return __cuemu_atomic_min(p, v); }
inline long long atomicMin(long long *p, long long v) { return __cuemu_atomic_min(p, v); }
template <class T> inline T __cuemu_atomic_exch(T *p, T v) {
    T old = *p;
    *p = v;
    return old;
}
inline int atomicExch(int *p, int v) { return __cuemu_atomic_exch(p, v); }
inline unsigned atomicExch(unsigned *p, unsigned v) { return __cuemu_atomic_exch(p, v); }
inline float atomicExch(float *p, float v) { return __cuemu_atomic_exch(p, v); }
template <class T> inline T __cuemu_atomic_cas(T *p, T cmp, T v) {
    T old = *p;
    if (old == cmp) *p = v;
    return old;
}
inline int atomicCAS(int *p, int c, int v) { return __cuemu_atomic_cas(p, c, v); }
inline unsigned atomicCAS(unsigned *p, unsigned c, unsigned v) {
    return __cuemu_atomic_cas(p, c, v);
}
inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long c,
                                    unsigned long long v) {
    return __cuemu_atomic_cas(p, c, v);
}

/* Math and bit casts the kernels use; the _rn forms are what they are in C (the kernels
 * spell them out on the GPU so nvcc does not fuse a multiply and an add). */
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline float __int_as_float(int i) { return cuemu::unbits<float>((uint32_t)i); }
inline int __float_as_int(float f) { return (int)(uint32_t)cuemu::bits(f); }
inline float __uint_as_float(unsigned u) { return cuemu::unbits<float>(u); }
inline unsigned __float_as_uint(float f) { return (unsigned)cuemu::bits(f); }
template <class T> inline T __ldg(const T *p) { return *p; }
/* the sum of the four signed byte products of a and b, plus c (sm_61's dp4a) */
inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 32; i += 8) c += (int)(int8_t)(a >> i) * (int)(int8_t)(b >> i);
    return c;
}
struct alignas(16) int4 {
    int x, y, z, w;
};

/* ---- the runtime API's memory, stream and error calls (host side) --------------------
 * Device memory is host memory and every call completes before it returns, so host code
 * written for the GPU (allocate, copy, launch, synchronise, check) runs unchanged. */

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2
} cudaError_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost,
    cudaMemcpyHostToDevice,
    cudaMemcpyDeviceToHost,
    cudaMemcpyDeviceToDevice,
    cudaMemcpyDefault
};
#define cudaMemAttachGlobal 1u

enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3
};
struct cudaPointerAttributes {
    cudaMemoryType type;
    int device;
    void *devicePointer;
    void *hostPointer;
};

namespace cuemu {
/* the "device" blocks cudaMalloc gave out, start -> bytes, so that cudaPointerGetAttributes
 * tells them from other host memory as the driver does */
inline std::map<uintptr_t, size_t> dev_blocks;
} /* namespace cuemu */

inline cudaError_t cudaMalloc(void **p, size_t bytes) {
    cuemu::no_capture("cudaMalloc");
    /* 256-byte aligned, as the driver's allocations are */
    *p = bytes <= SIZE_MAX - 255 ? aligned_alloc(256, (bytes + 255) / 256 * 256 + 256 * !bytes)
                                 : nullptr;
    if (!*p) return cudaErrorMemoryAllocation;
    cuemu::dev_blocks[(uintptr_t)*p] = bytes ? bytes : 1;
    return cudaSuccess;
}
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p) {
    const uintptr_t u = (uintptr_t)p;
    auto it = cuemu::dev_blocks.upper_bound(u);
    const bool dev = it != cuemu::dev_blocks.begin() && (--it, u < it->first + it->second);
    *a = cudaPointerAttributes{dev ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered, 0,
                               dev ? (void *)p : nullptr, dev ? nullptr : (void *)p};
    return cudaSuccess;
}
template <class T> inline cudaError_t cudaMalloc(T **p, size_t bytes) {
    return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
template <class T>
inline cudaError_t cudaMallocManaged(T **p, size_t bytes, unsigned flags = cudaMemAttachGlobal) {
    (void)flags;
    return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
inline cudaError_t cudaFree(void *p) {
    cuemu::no_capture("cudaFree");
    cuemu::dev_blocks.erase((uintptr_t)p);
    free(p);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    (void)kind;
    cuemu::no_capture("cudaMemcpy");
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}
/* (a capturing stream records the copy: it reads src when the graph runs) */
inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t s = nullptr) {
    (void)kind;
    auto node = [=] {
        if (bytes) memmove(dst, src, bytes);
    };
    if (!cuemu::record(s, node, "cudaMemcpyAsync")) node();
    return cudaSuccess;
}
/* page-locked host memory: plain host memory here */
inline cudaError_t cudaMallocHost(void **p, size_t bytes) {
    cuemu::no_capture("cudaMallocHost");
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFreeHost(void *p) {
    cuemu::no_capture("cudaFreeHost");
    free(p);
    return cudaSuccess;
}
inline cudaError_t cudaMemset(void *p, int v, size_t bytes) {
    cuemu::no_capture("cudaMemset");
    memset(p, v, bytes);
    return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s = nullptr) {
    auto node = [=] { memset(p, v, bytes); };
    if (!cuemu::record(s, node, "cudaMemsetAsync")) node();
    return cudaSuccess;
}
#define cudaStreamDefault 0u
#define cudaStreamNonBlocking 1u
/* (work runs when queued, so every stream is in order with every other) */
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    (void)flags;
    *s = new (std::nothrow) CUstream_st{nullptr};
    return *s ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaStreamCreate(cudaStream_t *s) {
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (s && s->rec) cuemu::host_fail("cudaStreamDestroy of a stream that is capturing");
    delete s;
    return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    (void)s;
    cuemu::no_capture("cudaStreamSynchronize");
    return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() {
    cuemu::no_capture("cudaDeviceSynchronize");
    return cudaSuccess;
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; } /* launch errors abort */
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int *n) { return *n = 1, cudaSuccess; }
inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }
inline const char *cudaGetErrorString(cudaError_t e) {
    return e == cudaSuccess ? "no error" : e == cudaErrorMemoryAllocation ? "out of memory"
                                                                           : "invalid argument";
}

#include "kernels/cuda/emu_graph.h"

#endif /* the emulator */
#endif
