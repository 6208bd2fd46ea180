/* ampcore CUDA simulator: the part of CUDA C++ the cuda backend's kernels use, for the host C++ compiler.
 *
 * Every CUDA thread of a block is a fiber (ucontext, a small stack of its own); one OS thread runs a block's
 * fibers and the blocks of a grid one after another: each warp runs as far as it can before the next, its
 * lanes round-robin between shuffles.  __syncthreads/__syncthreads_or is a real
 * barrier: a fiber yields there until every thread of its block has arrived; a thread that exits while others
 * wait at a barrier is an error (undefined behaviour in CUDA).  Warp shuffles are a barrier over the 32 lanes
 * of a warp with a double-buffered exchange slot per lane.  Kernels with no barrier and no shuffle (the build
 * says which) run their threads in a plain loop.  __shared__ is one static per kernel library: blocks run one
 * at a time, so it is per block.  Atomics are plain read-modify-writes for the same reason.
 *
 * Not simulated (so never shown): timing, the memory model between blocks, warp divergence and scheduling,
 * out-of-bounds accesses (no address checking: a wild pointer crashes the process).
 */
#ifndef AMPCORE_CUDA_SIM_SHIM_H
#define AMPCORE_CUDA_SIM_SHIM_H

/* _longjmp between fiber stacks: glibc's fortified longjmp refuses a jump to another stack. */
#undef _FORTIFY_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <ucontext.h>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__ static
#define __launch_bounds__(...)

struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace ampsim {

static uint3 thread_idx, block_idx;
static dim3 block_dim, grid_dim;

enum State { RUNNABLE, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };
const unsigned WARP = 32;
const size_t STACK_BYTES = 64 * 1024;

/* A fiber starts once, through makecontext/setcontext, on its own stack; from then on it switches with
 * _setjmp/_longjmp, which save no signal mask (swapcontext makes two system calls per switch).  A finished
 * thread parks at the end of fiber_loop and runs the next block's thread when resumed. */
struct Fiber {
    jmp_buf ctx;
    ucontext_t start;
    bool started = false;
    char *stack = nullptr;
    State state = DONE;
    uint3 idx;
    int predicate = 0;   /* this thread's __syncthreads_or/and/count argument, then the block's result */
    unsigned mask = 0;   /* the mask a shuffle named */
};

static Fiber *fibers = nullptr;
static unsigned n_fibers = 0, capacity = 0;
static jmp_buf scheduler;
static void (*body)() = nullptr;  /* runs the launched kernel as thread ``thread_idx`` */
static Fiber *current = nullptr;
static bool use_fibers = false;
static char error[512];
static bool failed = false;
/* per warp: two exchange generations of 8 bytes per lane (a double is the widest value shuffled) */
static uint64_t (*exchange)[2][WARP] = nullptr;
static unsigned *warp_phase = nullptr;

static void fail(const char *what) {
    if (!failed) {
        snprintf(error, sizeof error, "%s (block (%u,%u,%u), thread (%u,%u,%u))", what, block_idx.x, block_idx.y,
                 block_idx.z, thread_idx.x, thread_idx.y, thread_idx.z);
        failed = true;
    }
    if (current) _longjmp(scheduler, 1);  /* never resumed: the launch is abandoned, its fibers restarted */
}

static unsigned linear_tid(const uint3 &t) { return t.x + block_dim.x * (t.y + block_dim.y * t.z); }

static void yield(State why) {
    current->state = why;
    if (!_setjmp(current->ctx)) _longjmp(scheduler, 1);
    thread_idx = current->idx;
}

static void fiber_loop() {
    for (;;) {
        body();
        current->state = DONE;
        if (!_setjmp(current->ctx)) _longjmp(scheduler, 1);
    }
}

/* Run fiber ``f`` until it yields or finishes. */
static void resume(Fiber &f) {
    current = &f;
    thread_idx = f.idx;
    if (!_setjmp(scheduler)) {
        if (f.started) _longjmp(f.ctx, 1);
        f.started = true;
        getcontext(&f.start);
        f.start.uc_stack.ss_sp = f.stack;
        f.start.uc_stack.ss_size = STACK_BYTES;
        f.start.uc_link = nullptr;
        makecontext(&f.start, fiber_loop, 0);
        setcontext(&f.start);
    }
    current = nullptr;
}

}  // namespace ampsim

#define threadIdx (::ampsim::thread_idx)
#define blockIdx (::ampsim::block_idx)
#define blockDim (::ampsim::block_dim)
#define gridDim (::ampsim::grid_dim)
#define warpSize 32

static inline int __ampsim_block_barrier(int predicate) {
    if (!ampsim::use_fibers) { ampsim::fail("a barrier in a kernel built without fibers (simulator bug)"); return 0; }
    ampsim::current->predicate = predicate;
    ampsim::yield(ampsim::AT_BLOCK_BARRIER);
    return ampsim::current->predicate;
}
static inline void __syncthreads() { (void)__ampsim_block_barrier(0); }
static inline int __syncthreads_or(int p) { return __ampsim_block_barrier(p ? 1 : 0) & 1; }
static inline int __syncthreads_and(int p) { return (__ampsim_block_barrier(p ? 1 : 0) >> 1) & 1; }
static inline int __syncthreads_count(int p) { return __ampsim_block_barrier(p ? 1 : 0) >> 2; }

/* One shuffle: publish ``value``, wait for the warp, read lane ``src`` (own value when src is out of range). */
template <class T>
static inline T __ampsim_shuffle(unsigned mask, T value, int src, bool in_range) {
    static_assert(sizeof(T) <= 8, "shuffled values are at most 8 bytes");
    using namespace ampsim;
    if (!use_fibers) { fail("a shuffle in a kernel built without fibers (simulator bug)"); return value; }
    const unsigned tid = linear_tid(thread_idx), warp = tid / WARP, lane = tid % WARP;
    const unsigned phase = warp_phase[warp] & 1u;
    uint64_t bits = 0;
    memcpy(&bits, &value, sizeof(T));
    exchange[warp][phase][lane] = bits;
    current->mask = mask;
    yield(AT_WARP_BARRIER);
    if (!in_range) return value;
    T out;
    memcpy(&out, &exchange[warp][phase][src], sizeof(T));
    return out;
}
static inline unsigned __ampsim_lane() { return ampsim::linear_tid(threadIdx) % 32; }
/* A lane reading outside its ``width`` segment gets its own value, as in CUDA. */
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    const unsigned lane = __ampsim_lane();
    return __ampsim_shuffle(mask, v, (int)(lane + delta), lane % width + delta < (unsigned)width);
}
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    const unsigned lane = __ampsim_lane();
    return __ampsim_shuffle(mask, v, (int)lane - (int)delta, lane % width >= delta);
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    const unsigned lane = __ampsim_lane(), src = lane ^ (unsigned)lane_mask;
    return __ampsim_shuffle(mask, v, (int)src, src < (lane / width + 1) * width);
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
    const unsigned lane = __ampsim_lane();
    return __ampsim_shuffle(mask, v, (int)((lane / width) * width + (unsigned)src_lane % width), true);
}

/* Reinterpretations and the correctly rounded conversions (x86-64 SSE arithmetic is IEEE binary32/64). */
static inline unsigned int __float_as_uint(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static inline long long __double_as_longlong(double d) { long long u; memcpy(&u, &d, 8); return u; }
static inline double __longlong_as_double(long long u) { double d; memcpy(&d, &u, 8); return d; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __double2float_rn(double d) { return (float)d; }
static inline float __double2float_rz(double d) {
    float f = (float)d;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    return f;
}

/* cuda_fp16.h / cuda_bf16.h: the storage types and their conversions, rounded to nearest even exactly as
 * CUDA's (and as ampcore's own kernels convert by integer arithmetic): subnormals, overflow to inf, NaN kept
 * NaN.  Arithmetic operators on __half / __nv_bfloat16 are not defined: such a kernel fails to build. */
struct __half { unsigned short __x; };
struct __nv_bfloat16 { unsigned short __x; };
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __ushort_as_half(unsigned short u) { __half h; h.__x = u; return h; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 b; b.__x = u; return b; }
static inline float __half2float(__half h) {
    const unsigned int e = h.__x & 0x7fffu, sign = (unsigned int)(h.__x & 0x8000u) << 16;
    float f;
    if (e < 0x400u) f = (float)e * 5.9604644775390625e-8f;          /* zero and subnormals: exact */
    else if (e >= 0x7c00u) f = __uint_as_float((e << 13) | 0x7f800000u); /* inf, NaN (payload kept) */
    else f = __uint_as_float((e << 13) + 0x38000000u);
    return __uint_as_float(__float_as_uint(f) | sign);
}
static inline __half __float2half_rn(float f) {
    const unsigned int x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    unsigned int out;
    if (a > 0x7f800000u) out = sign | 0x7e00u | ((a >> 13) & 0x3ffu);
    else if (a >= 0x477ff000u) out = sign | 0x7c00u;
    else if (a >= 0x38800000u) {
        unsigned int r = a - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        out = sign | (r >> 13);
    } else out = sign | (__float_as_uint(__uint_as_float(a) + 0.5f) - 0x3f000000u);
    return __ushort_as_half((unsigned short)out);
}
static inline float __bfloat162float(__nv_bfloat16 b) { return __uint_as_float((unsigned int)b.__x << 16); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    unsigned int b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return __ushort_as_bfloat16((unsigned short)((b >> 16) | 0x40u));
    b += 0x7fffu + ((b >> 16) & 1u);
    return __ushort_as_bfloat16((unsigned short)(b >> 16));
}

/* Atomics: blocks and their threads never run at the same time, so a plain read-modify-write is atomic. */
template <class T> static inline T atomicAdd(T *p, T v) { T old = *p; *p = old + v; return old; }
template <class T> static inline T atomicMax(T *p, T v) { T old = *p; *p = old > v ? old : v; return old; }
template <class T> static inline T atomicMin(T *p, T v) { T old = *p; *p = old < v ? old : v; return old; }
template <class T> static inline T atomicExch(T *p, T v) { T old = *p; *p = v; return old; }
template <class T> static inline T atomicOr(T *p, T v) { T old = *p; *p = old | v; return old; }
template <class T> static inline T atomicCAS(T *p, T cmp, T v) { T old = *p; if (old == cmp) *p = v; return old; }

namespace ampsim {

/* Release warp ``w``'s shuffle barrier if every live lane of it waits there; false if it cannot move. */
static bool release_warp(unsigned w) {
    const unsigned lo = w * WARP, hi = lo + WARP < n_fibers ? lo + WARP : n_fibers;
    unsigned present = 0;
    for (unsigned i = lo; i < hi; ++i) {
        if (fibers[i].state == AT_WARP_BARRIER) present |= 1u << (i - lo);
        else if (fibers[i].state != DONE) return false;
    }
    if (!present) return false;
    for (unsigned i = lo; i < hi; ++i) {
        if (fibers[i].state == AT_WARP_BARRIER && fibers[i].mask != present) {
            current = nullptr;
            thread_idx = fibers[i].idx;
            fail("a shuffle's mask names lanes that have exited or do not exist");
            return false;
        }
    }
    for (unsigned i = lo; i < hi; ++i) if (fibers[i].state == AT_WARP_BARRIER) fibers[i].state = RUNNABLE;
    ++warp_phase[w];
    return true;
}

/* Release the block barrier if every live thread waits there; false if it cannot. */
static bool release_block() {
    unsigned live = 0, at_block = 0, any = 0, all = 1, count = 0;
    for (unsigned i = 0; i < n_fibers; ++i) {
        if (fibers[i].state == DONE) continue;
        ++live;
        if (fibers[i].state == AT_BLOCK_BARRIER) {
            ++at_block;
            any |= fibers[i].predicate;
            all &= fibers[i].predicate;
            count += fibers[i].predicate;
        }
    }
    if (!live || at_block != live) return false;
    if (live != n_fibers) { fail("__syncthreads waits for threads that have exited"); return false; }
    for (unsigned i = 0; i < n_fibers; ++i) {
        fibers[i].state = RUNNABLE;
        fibers[i].predicate = (int)(any | (all << 1) | (count << 2));
    }
    return true;
}

}  // namespace ampsim

template <class... A, size_t... I>
static void __ampsim_call(void (*kernel)(A...), void **args, std::index_sequence<I...>) {
    kernel(*static_cast<typename std::remove_reference<A>::type *>(args[I])...);
}

namespace ampsim {

template <class... A> struct Launch {
    static void (*kernel)(A...);
    static void **args;
    static void run() { __ampsim_call(kernel, args, std::index_sequence_for<A...>{}); }
};
template <class... A> void (*Launch<A...>::kernel)(A...) = nullptr;
template <class... A> void **Launch<A...>::args = nullptr;

static bool reserve(unsigned threads) {
    if (threads <= capacity) return true;
    Fiber *f = new Fiber[threads];
    for (unsigned i = 0; i < threads; ++i) {
        f[i].stack = (char *)malloc(STACK_BYTES);
        if (!f[i].stack) return false;
    }
    if (fibers) { for (unsigned i = 0; i < capacity; ++i) free(fibers[i].stack); delete[] fibers; }
    delete[] exchange;
    delete[] warp_phase;
    fibers = f;
    capacity = threads;
    exchange = new uint64_t[(threads + WARP - 1) / WARP][2][WARP];
    warp_phase = new unsigned[(threads + WARP - 1) / WARP];
    return true;
}

template <class... A>
static int launch(void (*kernel)(A...), void **args, const unsigned *grid, const unsigned *block, int fibered,
                  char *err, int err_len) {
    failed = false;
    error[0] = 0;
    grid_dim = dim3(grid[0], grid[1], grid[2]);
    block_dim = dim3(block[0], block[1], block[2]);
    const unsigned threads = block[0] * block[1] * block[2];
    use_fibers = fibered != 0;
    if (use_fibers && !reserve(threads)) {
        snprintf(err, err_len, "out of memory for %u fiber stacks", threads);
        return 1;
    }
    n_fibers = threads;
    Launch<A...>::kernel = kernel;
    Launch<A...>::args = args;
    body = Launch<A...>::run;
    for (unsigned bz = 0; bz < grid[2] && !failed; ++bz)
    for (unsigned by = 0; by < grid[1] && !failed; ++by)
    for (unsigned bx = 0; bx < grid[0] && !failed; ++bx) {
        block_idx = {bx, by, bz};
        if (!use_fibers) {
            for (unsigned tz = 0; tz < block[2]; ++tz)
            for (unsigned ty = 0; ty < block[1]; ++ty)
            for (unsigned tx = 0; tx < block[0]; ++tx) {
                thread_idx = {tx, ty, tz};
                __ampsim_call(kernel, args, std::index_sequence_for<A...>{});
            }
            continue;
        }
        for (unsigned i = 0; i < threads; ++i) {
            Fiber &f = fibers[i];
            f.idx = {i % block[0], (i / block[0]) % block[1], i / (block[0] * block[1])};
            f.state = RUNNABLE;
            f.predicate = 0;
        }
        for (unsigned w = 0; w < (threads + WARP - 1) / WARP; ++w) warp_phase[w] = 0;
        /* Each warp runs as far as it can (to a block barrier or its end) before the next: warps are
           independent between __syncthreads, as on a GPU, so a missing barrier shows as a wrong value rather
           than being hidden by a lockstep schedule.  The lanes of a warp run round-robin between shuffles. */
        const unsigned warps = (threads + WARP - 1) / WARP;
        unsigned live = threads;
        while (live && !failed) {
            for (unsigned w = 0; w < warps && !failed; ++w) {
                const unsigned lo = w * WARP, hi = lo + WARP < threads ? lo + WARP : threads;
                do {
                    for (unsigned i = lo; i < hi && !failed; ++i) {
                        if (fibers[i].state == RUNNABLE) resume(fibers[i]);
                    }
                } while (!failed && release_warp(w));
            }
            live = 0;
            for (unsigned i = 0; i < threads; ++i) live += fibers[i].state != DONE;
            if (live && !failed && !release_block() && !failed) {
                fail("deadlock: the threads of a block wait at different barriers");
            }
        }
    }
    current = nullptr;
    if (failed) {  /* fibers stopped mid-kernel start afresh next launch */
        for (unsigned i = 0; i < capacity; ++i) fibers[i].started = false;
        snprintf(err, err_len, "%s", error);
        return 1;
    }
    return 0;
}

}  // namespace ampsim

#endif
