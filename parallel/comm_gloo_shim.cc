// comm_gloo_shim.cc — the C++ side of parallel/comm_gloo_shim.h: a gloo::Context whose TCP pairs
// are connected from addresses the caller exchanged itself, and the collectives mtrain uses,
// each catching Gloo's exceptions into an error string. Gloo's allreduce is its ring algorithm
// (fixed for a fixed member count), so every member gets the same bits and a run repeats bit for
// bit; its summation order is the ring's, not rank 0 + rank 1 + ... as the shared-memory one.
#include "parallel/comm_gloo_shim.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

namespace {

// a context connected by hand: gloo::Context keeps its device and transport context protected
class Ctx : public gloo::Context {
  public:
    Ctx(int rank, int size) : gloo::Context(rank, size) {}
    std::shared_ptr<gloo::transport::Context> tc;
    size_t addr_bytes = 0;
    void prepare(std::shared_ptr<gloo::transport::Device> dev, std::vector<char> &blob) {
        device_ = dev;
        tc = dev->createContext(rank, size);
        tc->setTimeout(getTimeout());
        for (int i = 0; i < size; i++) {
            if (i == rank) continue;
            std::vector<char> a = tc->createPair(i)->address().bytes();
            if (!addr_bytes) {
                addr_bytes = a.size();
                blob.assign(addr_bytes * (size_t)size, 0);
            }
            std::memcpy(blob.data() + (size_t)i * addr_bytes, a.data(), a.size());
        }
    }
    void connect(const char *blobs, size_t blob_bytes) {
        for (int i = 0; i < size; i++) {
            if (i == rank) continue;
            const char *mine_at_i = blobs + (size_t)i * blob_bytes + (size_t)rank * addr_bytes;
            tc->getPair(i)->connect(std::vector<char>(mine_at_i, mine_at_i + addr_bytes));
        }
        transportContext_ = tc;
    }
};

const uint64_t P2P_SLOT = 0x6d74; // one slot for every send/recv; per peer they match in order

int fail(const char *what, char *err, size_t err_bytes) {
    if (err && err_bytes) std::snprintf(err, err_bytes, "%s", what);
    return -1;
}

template <typename F> int guarded(char *err, size_t err_bytes, F f) {
    try {
        f();
        return 0;
    } catch (const std::exception &e) {
        return fail(e.what(), err, err_bytes);
    } catch (...) {
        return fail("unknown Gloo exception", err, err_bytes);
    }
}

} // namespace

struct mt_gloo {
    std::shared_ptr<Ctx> ctx;
    std::vector<char> blob;
};

extern "C" int mt_gloo_prepare(const char *host, int rank, int size, int timeout_ms, mt_gloo **out, void **blob,
                               size_t *blob_bytes, char *err, size_t err_bytes) {
    *out = nullptr;
    mt_gloo *g = new (std::nothrow) mt_gloo;
    if (!g) return fail("out of memory", err, err_bytes);
    int rc = guarded(err, err_bytes, [&] {
        gloo::transport::tcp::attr attr(host);
        g->ctx = std::make_shared<Ctx>(rank, size);
        if (timeout_ms > 0) g->ctx->setTimeout(std::chrono::milliseconds(timeout_ms));
        g->ctx->prepare(gloo::transport::tcp::CreateDevice(attr), g->blob);
    });
    if (rc) {
        delete g;
        return rc;
    }
    *blob = g->blob.data();
    *blob_bytes = g->blob.size();
    *out = g;
    return 0;
}

extern "C" int mt_gloo_connect(mt_gloo *g, const void *blobs, size_t blob_bytes, char *err, size_t err_bytes) {
    return guarded(err, err_bytes, [&] { g->ctx->connect(static_cast<const char *>(blobs), blob_bytes); });
}

extern "C" int mt_gloo_allreduce_f32(mt_gloo *g, float *buf, size_t n, int op, char *err, size_t err_bytes) {
    return guarded(err, err_bytes, [&] {
        gloo::AllreduceOptions o(g->ctx);
        o.setOutput(buf, n);
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        typedef void (*reduce_fn)(void *, const void *, const void *, size_t);
        reduce_fn sum = &gloo::sum<float>, max = &gloo::max<float>;
        o.setReduceFunction(op == MT_GLOO_MAX ? max : sum);
        gloo::allreduce(o);
    });
}

extern "C" int mt_gloo_allgather(mt_gloo *g, const void *send, void *recv, size_t bytes_per_rank, char *err,
                                 size_t err_bytes) {
    return guarded(err, err_bytes, [&] {
        gloo::AllgatherOptions o(g->ctx);
        char *r = static_cast<char *>(recv);
        if (send != r + (size_t)g->ctx->rank * bytes_per_rank)
            o.setInput(const_cast<char *>(static_cast<const char *>(send)), bytes_per_rank);
        o.setOutput(r, bytes_per_rank * (size_t)g->ctx->size);
        gloo::allgather(o);
    });
}

extern "C" int mt_gloo_broadcast(mt_gloo *g, void *buf, size_t n_bytes, int root, char *err, size_t err_bytes) {
    return guarded(err, err_bytes, [&] {
        gloo::BroadcastOptions o(g->ctx);
        o.setOutput(static_cast<char *>(buf), n_bytes);
        o.setRoot(root);
        gloo::broadcast(o);
    });
}

extern "C" int mt_gloo_barrier(mt_gloo *g, char *err, size_t err_bytes) {
    return guarded(err, err_bytes, [&] {
        gloo::BarrierOptions o(g->ctx);
        gloo::barrier(o);
    });
}

extern "C" int mt_gloo_p2p_batch(mt_gloo *g, const mt_gloo_p2p *ops, int n_ops, char *err, size_t err_bytes) {
    return guarded(err, err_bytes, [&] {
        std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> bufs;
        for (int k = 0; k < n_ops; k++) {
            bufs.push_back(g->ctx->createUnboundBuffer(ops[k].buf, ops[k].n_bytes));
            if (ops[k].is_send) bufs.back()->send(ops[k].peer, P2P_SLOT);
            else bufs.back()->recv(ops[k].peer, P2P_SLOT);
        }
        auto tmo = g->ctx->getTimeout();
        for (int k = 0; k < n_ops; k++) {
            bool ok = ops[k].is_send ? bufs[k]->waitSend(tmo) : bufs[k]->waitRecv(tmo);
            if (!ok) throw std::runtime_error("send/recv aborted");
        }
    });
}

extern "C" void mt_gloo_close(mt_gloo *g) {
    if (!g) return;
    try {
        g->ctx->closeConnections();
    } catch (...) {
    }
}

extern "C" void mt_gloo_free(mt_gloo *g) {
    if (!g) return;
    try {
        g->ctx.reset();
    } catch (...) {
    }
    delete g;
}
