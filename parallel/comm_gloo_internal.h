/* comm_gloo_internal.h — what comm_gloo.c (collectives) and comm_gloo_make.c (world, split)
 * share: the per-communicator context, the member table and the family every communicator of
 * one world belongs to (for abort). */
#ifndef MT_COMM_GLOO_INTERNAL_H
#define MT_COMM_GLOO_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "parallel/comm_gloo.h"
#include "parallel/comm_gloo_shim.h"
#include "parallel/comm_shm.h"

typedef char node_name[MT_NODE_ID_BYTES];

typedef struct {
    int color, key, world_rank;
    node_name node;
    char addr[64];
} member_info;

/* every Gloo communicator of one world, for abort */
typedef struct {
    pthread_mutex_t mu;
    int refs, n, cap;
    mt_comm **comms;
} family;

typedef struct {
    mt_gloo *g;
    family *fam;
    member_info *members; /* per member: world rank, node, address */
    int timeout_s;
    _Atomic int aborted;
    mt_status failed;
    char why[768];
    mt_gloo_p2p *q; /* queued between group_start and group_end */
    int n_q, cap_q, in_group;
    float *tmp;
    size_t tmp_n;
} gloo_ctx;

extern const struct mt_comm_i mt_gloo_impl;
/* adds the Gloo communicator c to f and takes a reference on f */
void mt_gloo_fam_add(family *f, mt_comm *c);
mt_status mt_gloo_split(mt_comm *c, int color, int key, mt_comm **out);

#endif
