/* comm_gloo.h — the network implementation of comm.h for CPU ranks on several nodes: Gloo's TCP
 * transport (what torch.distributed uses for CPU tensors), connected through mtrain's own
 * exchanges (the bootstrap's allgather for the world, the parent communicator's for a split), no
 * Gloo store. The communicator factory (comm_factory.h) makes it the world communicator when the
 * ranks span several nodes; its split then gives each group the cheapest implementation that
 * carries it: shared memory (comm_shm.h) when all the group's ranks share a node, Gloo otherwise
 * (hierarchical, as NCCL is on GPUs).
 * What it guarantees:
 *   - reductions run Gloo's ring allreduce in fp32 (bf16 is widened to fp32 and rounded back, as
 *     the shared-memory one accumulates): for a fixed member count the order is fixed, so every
 *     member gets the same bits and a rerun repeats bit for bit; the order is the ring's, not
 *     rank 0 + rank 1 + ..., so sums differ from the serial ones in the last bits (as any change
 *     of the dp size does) and equivalence with the serial run holds within its tolerance;
 *   - every wait has the timeout (timeout_s); a dead or unreachable peer fails the call with
 *     MT_ERR_PEER naming the node (hostname, address, ranks) whose connection was lost, and the
 *     failed communicator closes its connections so that every member fails promptly (a ring's
 *     far side included); with more than two nodes a member may therefore name the node whose
 *     ranks failed first and closed their side, rather than the one that was lost;
 *   - abort() closes the connections of the whole family (the world and every Gloo group split
 *     from it), so the peers' pending calls fail promptly; its shared-memory groups are families
 *     of their own, aborted separately (mt_pstate_abort aborts every group, so that their members
 *     report the aborting rank's cause); one not aborted learns of an exiting member through its
 *     own dead-peer check (~100 ms) as "rank R died".
 * The world's creation ignores SIGPIPE process-wide (when it is at its default): Gloo writes to
 * sockets without MSG_NOSIGNAL, and a peer that closed its side must fail the call, not kill the
 * rank. Listening address: GLOO_SOCKET_IFNAME's address when set (torch's variable), else the address
 * this node reaches MASTER_ADDR from, else the first non-loopback IPv4 address that is up. */
#ifndef MT_COMM_GLOO_H
#define MT_COMM_GLOO_H

#include "parallel/bootstrap.h"
#include "parallel/comm.h"
#include "parallel/comm_shm.h"

/* 1 when this mtrain was built with Gloo */
int mt_comm_gloo_available(void);
/* The world communicator over the bootstrap's ranks; collective over them. nodes[r] is rank r's
 * node id (mt_comm_shm_node_id), already exchanged by the caller. */
mt_status mt_comm_gloo_init(mt_bootstrap *bs, const char (*nodes)[MT_NODE_ID_BYTES], int timeout_s, mt_comm **world);

#endif
