/* cluster.h - devices, nodes and the links between them.
 *
 * A cluster is a set of device types (speed, memory, price), nodes holding
 * devices, and two link levels: within a node and between nodes
 * (docs/formats.md, "Cluster").  Devices are numbered 0..n_devices-1 in file
 * order, node by node; plans refer to devices by that index and by id.
 */
#ifndef CL_CLUSTER_H
#define CL_CLUSTER_H

#include <stdint.h>

#include "base/status.h"

#define CLUSTER_NAME_MAX 64
#define CLUSTER_MAX_DEVICES (1 << 20)

/* What cleave needs to price one kernel from its shape on this device
 * (profiles/gemm.h, docs/compute.md): from the device's specification and
 * published kernel measurements, never fitted to training runs.  sms == 0:
 * no kernel model, layers are priced as FLOPs / (peak x efficiency). */
typedef struct cluster_kernels {
    int sms;                  /* streaming multiprocessors (whitepaper)          */
    int tile_m, tile_n;       /* output tile one multiprocessor computes per GEMM
                                 step, either orientation (cuBLAS's large tile) */
    double gemm_efficiency;   /* fraction of the fp16/bf16 (2-byte) or fp32 peak
                                 the best large GEMM reaches, (0, 1]             */
    double attention_efficiency; /* fraction of that peak a fused (flash)
                                 attention kernel reaches, (0, 1]               */
    double fp8_gemm_efficiency; /* fraction of the FP8 peak the best large FP8
                                 GEMM reaches, (0, 1]; 0: no FP8 kernel model    */
    double launch_s;          /* fixed cost of one kernel, seconds >= 0           */
    char source[1024];        /* where the numbers come from ("" = none)          */
} cluster_kernels;

typedef struct cluster_devtype {
    char name[CLUSTER_NAME_MAX];
    double peak_fp32_flops;   /* FLOP/s */
    double peak_fp16_flops;   /* FLOP/s, fp16/bf16 tensor path (0: same as fp32) */
    double peak_fp8_flops;    /* FLOP/s, FP8 tensor path, dense (0: none)        */
    uint64_t mem_bytes;       /* device memory */
    uint64_t reserve_bytes;   /* of it, what training cannot use: the runtime's
                                 context, library workspaces, allocator
                                 fragmentation (0: none; < mem_bytes) */
    double mem_bw_Bps;        /* memory bandwidth, bytes/s */
    double efficiency;        /* fraction of peak real layers reach, (0, 1] */
    double price_per_hour;    /* currency units per device-hour; 0 = unknown */
    char note[512];           /* where the numbers come from, free text ("" = none) */
    cluster_kernels kernels;  /* optional "kernels" member (sms 0: absent)  */
} cluster_devtype;

typedef struct cluster_device {
    char id[CLUSTER_NAME_MAX];
    int type;                 /* index into types */
    int node;                 /* index into node names */
} cluster_device;

typedef struct cluster_link {
    double bw_Bps;            /* bytes/s, > 0 */
    double latency_s;         /* seconds, >= 0 */
} cluster_link;

enum { CLUSTER_INTRA = 0, CLUSTER_INTER = 1, CLUSTER_LEVELS = 2 };

typedef struct cluster {
    char name[CLUSTER_NAME_MAX];
    int n_types;
    cluster_devtype *types;   /* owned */
    int n_nodes;
    char (*node_names)[CLUSTER_NAME_MAX]; /* owned */
    int n_devices;
    cluster_device *devices;  /* owned */
    cluster_link links[CLUSTER_LEVELS]; /* inter: {0, 0} when one node and none given */
    int nics_per_node;        /* 0: every device pair has its own inter-node link
                                 of links[CLUSTER_INTER]; k > 0: each node has k
                                 network cards of that bandwidth (each direction),
                                 shared by its devices in blocks (sim/link.c) */
    char note[512];           /* free text about the cluster ("" = none)  */
    char links_note[512];     /* source of the link figures ("" = none)   */
} cluster;

int cluster_load(cluster *c, const char *path, cl_err *e);
struct cJSON;
int cluster_from_json(cluster *c, const struct cJSON *root, const char *file, cl_err *e);
struct cJSON *cluster_to_json(const cluster *c);   /* caller owns */
int cluster_save(const cluster *c, const char *path, cl_err *e);
void cluster_free(cluster *c);
/* A deep copy of src into *dst (nothing shared: either may be freed or
 * changed without touching the other); cluster_free releases it. */
void cluster_copy(cluster *dst, const cluster *src);

/* A homogeneous cluster built from command-line flags: n devices of `type`,
 * per_node to a node (0: all in one node), intra/inter link bandwidths and
 * latencies.  Fails (CL_EINPUT) on non-positive counts or bandwidths. */
int cluster_uniform(cluster *c, const cluster_devtype *type, int n, int per_node,
                    cluster_link intra, cluster_link inter, cl_err *e);

/* The link joining two devices: intra-node if they share a node. */
static inline const cluster_link *cluster_link_between(const cluster *c, int a, int b)
{
    return &c->links[c->devices[a].node == c->devices[b].node ? CLUSTER_INTRA : CLUSTER_INTER];
}

/* The network card of device d in its node when the cluster declares
 * nics_per_node (devices of a node in blocks: with 8 devices and 4 cards,
 * devices 0-1 use card 0, ...), as node x nics_per_node + card; -1 when it
 * declares none. */
int cluster_nic_of(const cluster *c, int d);
/* The same from the node, the device's place in it and the node's device
 * count (callers that know them: sim/link.c). */
static inline int64_t cluster_nic_card(int nics, int node, int place, int count)
{
    return (int64_t)node * nics + (int64_t)place * nics / count;
}

/* Memory a device of type t can give to training: mem_bytes less its
 * reserve.  Plans fit against this. */
static inline uint64_t cluster_usable_bytes(const cluster_devtype *t)
{
    return t->mem_bytes - t->reserve_bytes;
}

/* Effective compute speed of a device type in FLOP/s (peak x efficiency),
 * for the given element size (2 bytes uses the fp16 peak when known). */
double cluster_flops(const cluster_devtype *t, int elem_bytes);

/* Validate one device type as a loader would (peaks and bandwidth > 0,
 * efficiency in (0, 1], price >= 0); `what` names it in the message. */
int cluster_devtype_check(const cluster_devtype *t, const char *what, cl_err *e);

/* Device presets ("cleave-devices" files, e.g. profiles/devices.json).
 * cluster_devtypes_load fills *types (caller frees) and *n.  path NULL
 * means the default file: $CLEAVE_DEVICES, else <exe>/../share/cleave/
 * profiles/devices.json, <exe>/../profiles/devices.json, then
 * ./profiles/devices.json (first that exists). */
int cluster_devtypes_load(const char *path, cluster_devtype **types, int *n, cl_err *e);
/* types[0..n-1] as a "cleave-devices" file (caller owns; loads back to the
 * same types). */
struct cJSON *cluster_devtypes_to_json(const cluster_devtype *types, int n);
/* The type called `name` in types[0..n-1], or NULL. */
const cluster_devtype *cluster_devtype_find(const cluster_devtype *types, int n,
                                            const char *name);
/* Load the presets (path as above) and copy the one called `name` into
 * *out; an unknown name fails with CL_EINPUT listing the known ones. */
int cluster_devtype_preset(const char *path, const char *name, cluster_devtype *out,
                           cl_err *e);

#endif
