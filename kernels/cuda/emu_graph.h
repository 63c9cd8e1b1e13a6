/* emu_graph.h - CUDA graphs under the emulator (included by emu.h; not for nvcc): stream
 * capture records a stream's launches, copies and memsets as nodes instead of running
 * them (emu.h's cuemu::record), a graph is the list of them in order, an executable graph
 * a copy of that list, and a launch runs it. As strict as CUDA where it matters to host
 * code: a synchronous call during a capture (cudaMemcpy, cudaMalloc, cudaFree,
 * cudaStreamSynchronize, ...) or work on the legacy default stream aborts with a message
 * (emu.h's no_capture), and so do capturing the legacy stream, capturing a stream twice,
 * ending a capture that was not begun and destroying a capturing stream. No
 * cudaGraphExecUpdate: the backend replays graphs whose launches are the same. */
#ifndef MD_CUDA_EMU_GRAPH_H
#define MD_CUDA_EMU_GRAPH_H

enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2
};
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2
};

struct CUgraph_st {
    std::vector<std::function<void()>> nodes;
};
struct CUgraphExec_st {
    std::vector<std::function<void()>> nodes;
};
typedef CUgraph_st *cudaGraph_t;
typedef CUgraphExec_st *cudaGraphExec_t;

namespace cuemu {
inline uint64_t n_graph_launches; /* graphs launched so far */
} /* namespace cuemu */

inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
    (void)mode;
    if (!s) cuemu::host_fail("cudaStreamBeginCapture of the legacy default stream");
    if (s->rec) cuemu::host_fail("cudaStreamBeginCapture of a stream already capturing");
    s->rec = new std::vector<std::function<void()>>();
    cuemu::n_capturing++;
    return cudaSuccess;
}

inline cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status) {
    *status = s && s->rec ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

/* *g: the graph of what s recorded since its capture began (free with cudaGraphDestroy). */
inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    if (!s || !s->rec) cuemu::host_fail("cudaStreamEndCapture of a stream that is not capturing");
    *g = new CUgraph_st{std::move(*s->rec)};
    delete s->rec;
    s->rec = nullptr;
    cuemu::n_capturing--;
    return cudaSuccess;
}

inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g,
                                        unsigned long long flags = 0) {
    (void)flags;
    *e = new CUgraphExec_st{g->nodes};
    return cudaSuccess;
}

/* Runs e's nodes in order (recorded as one node when s captures). */
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
    auto node = [e] {
        cuemu::n_graph_launches++;
        for (const auto &n : e->nodes) n();
    };
    if (!cuemu::record(s, node, "cudaGraphLaunch")) node();
    return cudaSuccess;
}

inline cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete g;
    return cudaSuccess;
}

inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
    delete e;
    return cudaSuccess;
}

#endif
