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
#define PN_NVML_DETAIL 256

/* The first failure of a device (or of the whole call): NVML return code, the function
 * that returned it; code 0 means none. */
typedef struct {
    int code;
    char function[PN_NVML_FUNC];
} pn_nvml_error;

typedef struct {
    unsigned int slot;                /* index given to nvmlDeviceGetMigDeviceHandleByIndex */
    char uuid[PN_NVML_STR];           /* "" when unknown */
    char name[PN_NVML_STR];
    int has_memory;
    unsigned long long memory_total;
    int gpu_instance_id;              /* -1 when unknown */
    int compute_instance_id;          /* -1 when unknown */
    pn_nvml_error error;
} pn_nvml_mig;

typedef struct {
    unsigned int index;
    int has_handle;
    pn_nvml_error error;
    char name[PN_NVML_STR];
    char uuid[PN_NVML_STR];
    char pci_bus_id[PN_NVML_BUSID];
    int has_memory;
    unsigned long long memory_total;
    int numa_node;                    /* -1 when NVML cannot tell */
    int has_cpu_affinity;
    unsigned long cpu_affinity[PN_NVML_CPUSET_WORDS];
    int cc_major;                     /* -1 when unknown */
    int cc_minor;
    int mig_mode;                     /* current mode: 1 enabled, 0 disabled or unsupported */
    unsigned int mig_count;
    unsigned int mig_slots;           /* what nvmlDeviceGetMaxMigDeviceCount answered */
    pn_nvml_mig mig[PN_NVML_MAX_MIG];
    /* Active NVLinks by what is at the far end (told by the remote device type, or, on
     * drivers without it, by whether the remote PCI bus id is a GPU of this node). */
    unsigned int nvlink_to[PN_NVML_MAX_GPUS]; /* direct links to GPU j of this node */
    unsigned int nvswitch_links;              /* links into an NVSwitch fabric */
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
    pn_nvml_error shutdown;           /* nvmlShutdown's failure after a read, code 0 if none */
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
} pn_nvml_snapshot;

/* Fill *out (which need not be zeroed: every field read is written) with the host facts
 * (sysfs under sysfs_root, NULL meaning "/sys") and what NVML reports, from the NVML library at library_path (NULL or "" means
 * "libnvidia-ml.so.1"). Returns out->error.code: 0 on success, else why NVML gave nothing
 * (12 library not found, 13 required function not found, or nvmlInit's code). Per-device
 * failures are recorded in the device's entry and never abort the call. */
int pn_nvml_snapshot_read(const char *library_path, const char *sysfs_root,
                          pn_nvml_snapshot *out);

#endif
