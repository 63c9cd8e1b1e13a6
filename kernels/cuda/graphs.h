/* graphs.h - the cuda backend's step graphs (host code, included by backend.cu): the
 * launches of one forward pass recorded as it is issued, then run as one CUDA graph,
 * captured the second time that exact sequence of launches is seen and replayed after.
 *
 * Why this design: a decode step issues hundreds of small kernels whose launch cost, not
 * their work, bounds a small model on a GPU. Between two steps of the same shape only the
 * batch's small integer arrays (tokens, positions, slots, segments, kept rows) change, and
 * those reach the kernels through device pointers. So while recording, the ops stage
 * those arrays into one page-locked arena at offsets fixed by the order they are asked
 * for, and queue each launch as a closure together with its signature: the launcher, then
 * the bytes of every argument (device pointers into the arena included). At the end of the
 * segment one asynchronous copy sends the arena up, and the signature picks the graph:
 * found, it is replayed; seen once before, the closures run under stream capture into a
 * new graph that is instantiated, kept and launched; never seen, they run as they are
 * (a prefill, or a mixture's per-step routing, would otherwise pay an instantiation for a
 * graph nobody replays). A replay is exact by construction (the same launches with the
 * same arguments, the arrays' new contents read from the arena), and a step whose
 * launches differ (another row count, a longer attention split) is simply another graph.
 * The cost: the engine still walks its forward pass on the host each step (no launches,
 * a few hundred closures), and ops that must act on the host mid-pass end the segment
 * early (state.cuh's eager scope: a buffer that grows, a copy to the host, cuBLAS), which
 * then run as they come. cudaGraphExecUpdate would avoid the arena but needs a capture
 * every step; keying on the launches needs none.
 *
 * Every graph holds raw pointers into the backend's buffers: anything that frees or moves
 * one (a scratch growth, buf_free, the arena's own growth) drops every graph first. */
#ifndef MD_CUDA_GRAPHS_H
#define MD_CUDA_GRAPHS_H

#include <string.h>

#include <algorithm>
#include <functional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

namespace cu_graphs {

constexpr size_t ARENA_MIN = 4096; /* bytes of arena a step starts with */
constexpr size_t MAX_GRAPHS = 32;   /* graphs kept (the oldest dropped past it) */
constexpr size_t MAX_SEEN = 64;     /* signatures remembered (hashes) for a second sighting */
constexpr size_t ALIGN = 16;        /* of each staged array in the arena */

struct graph {
    std::vector<unsigned char> sig; /* the launches it replays */
    size_t hash;
    cudaGraphExec_t exec;
};

struct staged {
    const void *host;
    size_t bytes, at;
};

struct recorder {
    cudaStream_t stream;
    bool enabled; /* graphs wanted (MD_CUDA_GRAPHS is not 0) */
    bool in_step; /* between step_begin and the sync ending it */
    bool on;      /* recording: launches are queued in pending, not issued */
    std::vector<std::function<void()>> pending;
    std::vector<unsigned char> sig;
    std::vector<staged> arrays; /* staged this step, for reuse */
    unsigned char *host;        /* the arena: cap bytes of page-locked memory ... */
    void *dev;                  /* ... and its device twin */
    size_t cap, used, seg_start, need;
    std::vector<graph> graphs;
    std::vector<size_t> seen; /* hashes of the last MAX_SEEN signatures run without a graph */
    uint64_t captures, replays, eager; /* segments ended each way (cu_graph_counts) */
};

inline void drop_graphs(recorder *r) {
    for (graph &g : r->graphs) cudaGraphExecDestroy(g.exec);
    r->graphs.clear();
}

inline void free_recorder(recorder *r) {
    drop_graphs(r);
    cudaFreeHost(r->host);
    cudaFree(r->dev);
    r->host = nullptr, r->dev = nullptr, r->cap = 0;
}

/* The arena grown to the most a step has asked for (dropping the graphs, which point
 * into the old one); false without memory (the step then runs without a graph). */
inline bool arena_fits(recorder *r) {
    const size_t want = std::max(r->need, ARENA_MIN);
    if (r->dev && want <= r->cap) return true;
    const size_t n = std::max(want, 2 * r->cap);
    free_recorder(r);
    if (cudaMallocHost(reinterpret_cast<void **>(&r->host), n) != cudaSuccess ||
        cudaMalloc(&r->dev, n) != cudaSuccess) {
        cudaGetLastError();
        free_recorder(r);
        return false;
    }
    r->cap = n;
    return true;
}

/* A step begins: recording on when graphs are wanted and the arena is there (the last
 * step's arena copies waited for first: its bytes are about to be overwritten). */
inline void begin(recorder *r) {
    if (r->used && r->stream) cudaStreamSynchronize(r->stream);
    r->in_step = r->enabled;
    r->on = r->in_step && arena_fits(r);
    r->used = r->seg_start = 0;
    r->arrays.clear();
}

/* The device address of a copy of bytes of host memory in the arena (the same array
 * asked for again this step, its first copy), or NULL when it does not fit (need
 * grows, so the next step's arena will hold it). */
inline const void *stage(recorder *r, const void *host, size_t bytes) {
    for (const staged &a : r->arrays)
        if (a.host == host && a.bytes == bytes && memcmp(r->host + a.at, host, bytes) == 0)
            return static_cast<unsigned char *>(r->dev) + a.at;
    const size_t at = (r->used + ALIGN - 1) / ALIGN * ALIGN;
    r->need = std::max(r->need, at + bytes);
    if (at + bytes > r->cap) return nullptr;
    if (bytes) memcpy(r->host + at, host, bytes);
    r->arrays.push_back(staged{host, bytes, at});
    r->used = at + bytes;
    return static_cast<unsigned char *>(r->dev) + at;
}

inline void add_sig(recorder *r, const void *p, size_t n) {
    const unsigned char *c = static_cast<const unsigned char *>(p);
    r->sig.insert(r->sig.end(), c, c + n);
}

/* Queues launcher fn(a..., stream) while recording, else calls it: a launcher's bool
 * (false: a type without a kernel, nothing queued) is taken as true while recording,
 * the weights having passed mat_prepare's check of the same list. */
template <class R, class... P, class... A> R launch(recorder *r, R (*fn)(P...), A... a) {
    if (!r->on) return fn(a..., r->stream);
    std::tuple<std::decay_t<P>...> args(a..., r->stream);
    add_sig(r, &fn, sizeof fn);
    std::apply([r](const auto &...x) { (add_sig(r, &x, sizeof x), ...); }, args);
    r->pending.push_back([fn, args] { std::apply(fn, args); });
    if constexpr (!std::is_void_v<R>) return true;
}

/* Queues f while recording (its signature the n bytes at sig, which say all it does),
 * else runs it. */
inline void launch_fn(recorder *r, const void *sig, size_t n, std::function<void()> f) {
    if (!r->on) return f();
    add_sig(r, sig, n);
    r->pending.push_back(std::move(f));
}

inline graph *find(recorder *r, size_t hash) {
    for (graph &g : r->graphs)
        if (g.hash == hash && g.sig == r->sig) return &g;
    return nullptr;
}

/* The pending launches captured into a new graph (kept, the oldest dropped past
 * MAX_GRAPHS), or NULL with the error in *e. */
inline graph *capture(recorder *r, size_t hash, cudaError_t *e) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t x = nullptr;
    *e = cudaStreamBeginCapture(r->stream, cudaStreamCaptureModeGlobal);
    if (*e != cudaSuccess) return nullptr;
    for (auto &f : r->pending) f();
    *e = cudaStreamEndCapture(r->stream, &g);
    if (*e == cudaSuccess) *e = cudaGraphInstantiate(&x, g, 0);
    if (g) cudaGraphDestroy(g);
    if (*e != cudaSuccess) return nullptr;
    if (r->graphs.size() >= MAX_GRAPHS) {
        cudaGraphExecDestroy(r->graphs.front().exec);
        r->graphs.erase(r->graphs.begin());
    }
    r->graphs.push_back(graph{r->sig, hash, x});
    return &r->graphs.back();
}

/* Ends the segment being recorded: its arena bytes sent up, then its launches as a graph
 * (found, or captured at its second sighting) when keep, else as they are (also a
 * segment cut short by an op that frees memory). Recording stays off until resume.
 * Returns the first CUDA error. */
inline cudaError_t end(recorder *r, bool keep, uint64_t *h2d_bytes) {
    if (!r->on) return cudaSuccess;
    r->on = false;
    cudaError_t e = cudaSuccess;
    if (r->used > r->seg_start) {
        e = cudaMemcpyAsync(static_cast<unsigned char *>(r->dev) + r->seg_start,
                            r->host + r->seg_start, r->used - r->seg_start,
                            cudaMemcpyHostToDevice, r->stream);
        *h2d_bytes += r->used - r->seg_start;
    }
    if (e == cudaSuccess && !r->pending.empty()) {
        const size_t hash = std::hash<std::string_view>()(std::string_view(
            reinterpret_cast<const char *>(r->sig.data()), r->sig.size()));
        graph *g = keep ? find(r, hash) : nullptr;
        const bool again = keep && std::find(r->seen.begin(), r->seen.end(), hash) != r->seen.end();
        if (g) r->replays++;
        else if (again && (g = capture(r, hash, &e))) r->captures++;
        else if (keep && !again) {
            if (r->seen.size() >= MAX_SEEN) r->seen.erase(r->seen.begin());
            r->seen.push_back(hash);
        }
        if (g) e = cudaGraphLaunch(g->exec, r->stream);
        else if (e == cudaSuccess) {
            for (auto &f : r->pending) f();
            r->eager++;
        }
    }
    r->pending.clear();
    r->sig.clear();
    r->seg_start = r->used;
    return e;
}

/* Recording again, for the rest of the step, after an op that ended a segment. */
inline void resume(recorder *r) { r->on = r->in_step && r->dev; }

} /* namespace cu_graphs */

#endif
