/* One-call NVML topology snapshot for placement_native.snapshot.
 *
 * libnvidia-ml is dlopen'ed at run time, so building needs neither the driver nor
 * nvml.h: the few NVML types used are declared in nvml_snapshot.c with the layouts and
 * values of nvml.h. Everything the snapshot needs is read in pn_nvml_snapshot() into one
 * caller-owned struct; the GIL is released for the whole call. */
#ifndef PLACEMENT_NATIVE_NVML_SNAPSHOT_H
#define PLACEMENT_NATIVE_NVML_SNAPSHOT_H

#define PN_NVML_MAX_GPUS 64
#define PN_NVML_MAX_PAIRS (PN_NVML_MAX_GPUS * (PN_NVML_MAX_GPUS - 1) / 2)
#define PN_NVML_MAX_MIG 8        /* at most 7 MIG devices per GPU today */
#define PN_NVML_MAX_LINKS 36     /* NVML_NVLINK_MAX_LINKS of current nvml.h */
#define PN_NVML_CPUSET_WORDS 64  /* 64-bit words: 4096 CPUs */
#define PN_NVML_STR 96           /* NVML_DEVICE_NAME_V2_BUFFER_SIZE, ..._UUID_V2_... */
#define PN_NVML_DRIVER 80        /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */
#define PN_NVML_BUSID 32         /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
#define PN_NVML_FUNC 48
#define PN_NVML_FABRIC_UUID 16     /* NVML_GPU_FABRIC_UUID_LEN */
#define PN_NVML_DETAIL 256
#define PN_NVML_MAX_PROCS 4096   /* compute processes listed per snapshot, all devices together */
#define PN_NVML_PROC_FIRST 64    /* room offered by the first process query of a device */
#define PN_NVML_PROC_CAP 4096    /* the most processes read from one device */
#define PN_NVML_PROC_TRIES 4     /* process queries per device, retries included */

/* The first failure of a device (or of the whole call): NVML return code, the function
 * that returned it; code 0 means none. */
typedef struct {
    int code;
    char function[PN_NVML_FUNC];
} pn_nvml_error;

/* The compute processes of one device (a GPU, or a MIG device of a GPU in MIG mode). */
typedef struct {
    int read;                         /* 1 when the device answered its process list */
    unsigned int first;               /* its entries: process_*[first, first + count) */
    unsigned int count;
    unsigned int total;               /* NVML's count: above count when the snapshot was full */
} pn_nvml_procs;

typedef struct {
    unsigned int slot;                /* index given to nvmlDeviceGetMigDeviceHandleByIndex */
    char uuid[PN_NVML_STR];           /* "" when unknown */
    char name[PN_NVML_STR];
    int has_memory;                   /* memory_total and memory_used were read */
    unsigned long long memory_total;
    unsigned long long memory_used;
    pn_nvml_procs procs;
    int gpu_instance_id;              /* -1 when unknown */
    int compute_instance_id;          /* -1 when unknown */
    pn_nvml_error error;
} pn_nvml_mig;

typedef struct {
    /* What the GPU is, from index to fabric_health_mask: the same bytes read after read
     * while nothing about the GPU changes (the entry is zeroed first, padding included), so
     * the Python side decodes them once and compares them after. */
    unsigned int index;
    char name[PN_NVML_STR];
    char uuid[PN_NVML_STR];
    char pci_bus_id[PN_NVML_BUSID];
    int numa_node;                    /* -1 when NVML cannot tell */
    int has_cpu_affinity;
    unsigned long cpu_affinity[PN_NVML_CPUSET_WORDS];
    int cc_major;                     /* -1 when unknown */
    int cc_minor;
    int mig_mode;                     /* current mode: 1 enabled, 0 disabled or unsupported */
    unsigned int mig_slots;           /* what nvmlDeviceGetMaxMigDeviceCount answered */
    /* Active NVLinks by what is at the far end (told by the remote device type, or, on
     * drivers without it, by whether the remote PCI bus id is a GPU of this node). */
    unsigned int nvlink_to[PN_NVML_MAX_GPUS]; /* direct links to GPU j of this node */
    unsigned int nvswitch_links;              /* links into an NVSwitch fabric */
    /* The GPU's NVLink fabric (nvmlDeviceGetGpuFabricInfoV, struct v3 then v2, else the
     * legacy nvmlDeviceGetGpuFabricInfo): has_fabric 0 where the driver reports none (no
     * such symbol, or NOT_SUPPORTED). */
    int has_fabric;
    unsigned char fabric_cluster_uuid[PN_NVML_FABRIC_UUID];
    int fabric_status;                /* nvmlReturn_t of the GPU's fabric registration */
    unsigned int fabric_clique_id;
    unsigned int fabric_state;        /* nvmlGpuFabricState_t: 0 not supported .. 3 completed */
    unsigned int fabric_health_mask;  /* 0 from the legacy call, which has none */
    /* What it is doing, and what failed. */
    int has_handle;
    pn_nvml_error error;
    int has_memory;                   /* memory_total and memory_used were read */
    unsigned long long memory_total;
    unsigned long long memory_used;   /* nvmlMemory_v2_t's used where the driver has it */
    pn_nvml_procs procs;              /* not asked for a GPU in MIG mode: its MIG devices are */
    unsigned int mig_count;
    pn_nvml_mig mig[PN_NVML_MAX_MIG];
} pn_nvml_gpu;

/* Host facts read beside NVML (no packet is sent). */
typedef struct {
    char hostname[256];
    int cpus;                         /* online logical CPUs */
    int numa_nodes;                   /* node directories under <sysfs>/devices/system/node */
    char route_interface[32];         /* interface of the IPv4 default route, "" if none */
    char route_ip[64];                /* its IPv4 address, "" if none or loopback */
} pn_host;

typedef struct {
    pn_host host;                     /* always filled, NVML or not */
    pn_nvml_error error;              /* library missing, symbol missing, init failed */
    char detail[PN_NVML_DETAIL];      /* dlerror() text and the like */
    char driver[PN_NVML_STR];
    unsigned int device_count;        /* what NVML reports (may exceed PN_NVML_MAX_GPUS) */
    unsigned int gpu_count;           /* entries filled: min(device_count, PN_NVML_MAX_GPUS) */
    pn_nvml_gpu gpus[PN_NVML_MAX_GPUS];  /* only [0, gpu_count) are written */
    /* Every pair i < j of the filled GPUs, in (i, j) order, as five ints: i, j,
     * nvmlGpuTopologyLevel_t (-1 unknown), NVLinks between them (direct links, else the
     * narrower side's links into a shared NVSwitch fabric: nvidia-smi's NV#; 0 for none),
     * nvmlGpuP2PStatus_t for reads (-1 unknown). */
    unsigned int pair_count;
    int pairs[PN_NVML_MAX_PAIRS * 5];
    /* The compute processes of all devices (each device's pn_nvml_procs says which are
     * its): pid, and used GPU memory in bytes, NVML_VALUE_NOT_AVAILABLE (~0ULL) where NVML
     * cannot tell (e.g. another user's process, to an unprivileged caller). Two arrays,
     * not an array of structs, so each converts in one go. */
    unsigned int process_count;
    unsigned int process_pid[PN_NVML_MAX_PROCS];
    unsigned long long process_used[PN_NVML_MAX_PROCS];
} pn_nvml_snapshot;

/* Fill *out (which need not be zeroed: every field read is written) with the host facts
 * (sysfs under sysfs_root, NULL meaning "/sys") and what NVML reports, from the NVML
 * library at library_path (NULL or "" means "libnvidia-ml.so.1"). Returns out->error.code:
 * 0 on success, else why NVML gave nothing (12 library not found, 13 required function
 * not found, or nvmlInit's code). Per-device failures are recorded in the device's entry
 * and never abort the call.
 *
 * NVML is initialised by the first call and held for the process (one reference of its
 * reference-counted init) until pn_nvml_release(): a failed init is not kept (the next
 * call tries again); a forked child inits its own; a held session that answers
 * UNINITIALIZED, DRIVER_NOT_LOADED or GPU_IS_LOST is let go and the read done once more
 * on a fresh init. */
int pn_nvml_snapshot_read(const char *library_path, const char *sysfs_root,
                          pn_nvml_snapshot *out);

/* Give back the held NVML reference (nvmlShutdown); returns its code, 0 when none was
 * held. The next pn_nvml_snapshot_read() initialises NVML again. */
int pn_nvml_release(void);

/* 1 while this process holds an NVML session, else 0. */
int pn_nvml_held(void);

/* Drop the held session without shutting it down (in a forked child: the reference is
 * the parent's). */
void pn_nvml_forget(void);

#endif
