/* One-call NVML topology snapshot; see nvml_snapshot.h. */
#include "nvml_snapshot.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- The slice of the NVML ABI used here (values and layouts as in nvml.h). ---- */
typedef int nvmlReturn_t; /* enum nvmlReturn_enum */
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_LIBRARY_NOT_FOUND 12
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_AFFINITY_SCOPE_NODE 0  /* nvmlAffinityScope_t */
#define NVML_P2P_CAPS_INDEX_READ 0  /* nvmlGpuP2PCapsIndex_t */
#define NVML_FEATURE_ENABLED 1      /* nvmlEnableState_t */
#define NVML_DEVICE_MIG_ENABLE 1

typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct { /* nvmlPciInfo_t, as filled by nvmlDeviceGetPciInfo_v3 */
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct { /* nvmlMemory_t (v1) */
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct { /* nvmlMemory_v2_t: used no longer counts the driver's reserved memory */
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;
/* NVML_STRUCT_VERSION(Memory, 2): the struct's size, and the version in the top byte. */
#define NVML_MEMORY_V2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct { /* nvmlProcessInfo_v1_t: what nvmlDeviceGetComputeRunningProcesses fills */
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct { /* nvmlProcessInfo_v2_t, also nvmlProcessInfo_t of the _v3 function */
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

/* NVLink fabric info. The legacy struct of nvmlDeviceGetGpuFabricInfo has no version tag
 * and no health mask; nvmlDeviceGetGpuFabricInfoV takes a tagged struct (v2 adds the
 * health mask, v3 the health summary) and answers ARGUMENT_VERSION_MISMATCH to a tag it
 * does not know. nvmlGpuFabricState_t is an unsigned char. */
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25

typedef struct { /* nvmlGpuFabricInfo_t */
    unsigned char clusterUuid[PN_NVML_FABRIC_UUID];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
} nvmlGpuFabricInfo_t;

typedef struct { /* nvmlGpuFabricInfo_v2_t */
    unsigned int version;
    unsigned char clusterUuid[PN_NVML_FABRIC_UUID];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;

typedef struct { /* nvmlGpuFabricInfo_v3_t, nvmlGpuFabricInfoV_t of current nvml.h */
    unsigned int version;
    unsigned char clusterUuid[PN_NVML_FABRIC_UUID];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
    unsigned char healthSummary;
} nvmlGpuFabricInfo_v3_t;
/* NVML_STRUCT_VERSION(GpuFabricInfo, 2) and (.., 3): 0x02000024 and 0x03000028. */
#define NVML_GPU_FABRIC_INFO_V2 ((unsigned int)(sizeof(nvmlGpuFabricInfo_v2_t) | (2u << 24)))
#define NVML_GPU_FABRIC_INFO_V3 ((unsigned int)(sizeof(nvmlGpuFabricInfo_v3_t) | (3u << 24)))
#define NVML_GPU_FABRIC_STATE_NOT_SUPPORTED 0

typedef struct {
    nvmlReturn_t (*Init)(void);
    nvmlReturn_t (*Shutdown)(void);
    nvmlReturn_t (*DeviceGetCount)(unsigned int *);
    nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t *);
    /* optional: NULL means "not supported by this driver" */
    nvmlReturn_t (*SystemGetDriverVersion)(char *, unsigned int);
    nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*DeviceGetMemoryInfoV2)(nvmlDevice_t, nvmlMemory_v2_t *);
    /* the newest of _v3, _v2 and the unversioned (v1 struct) function the driver has */
    nvmlReturn_t (*DeviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned int *, void *);
    nvmlReturn_t (*DeviceGetNumaNodeId)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetMemoryAffinity)(nvmlDevice_t, unsigned int, unsigned long *, int);
    nvmlReturn_t (*DeviceGetCpuAffinityWithinScope)(nvmlDevice_t, unsigned int, unsigned long *,
                                                    int);
    nvmlReturn_t (*DeviceGetCpuAffinity)(nvmlDevice_t, unsigned int, unsigned long *);
    nvmlReturn_t (*DeviceGetCudaComputeCapability)(nvmlDevice_t, int *, int *);
    nvmlReturn_t (*DeviceGetMigMode)(nvmlDevice_t, unsigned int *, unsigned int *);
    nvmlReturn_t (*DeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*DeviceGetGpuInstanceId)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetComputeInstanceId)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetTopologyCommonAncestor)(nvmlDevice_t, nvmlDevice_t, int *);
    nvmlReturn_t (*DeviceGetP2PStatus)(nvmlDevice_t, nvmlDevice_t, int, int *);
    nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned int, int *);
    nvmlReturn_t (*DeviceGetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
    nvmlReturn_t (*DeviceGetNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned int, int *);
    nvmlReturn_t (*DeviceGetGpuFabricInfoV)(nvmlDevice_t, nvmlGpuFabricInfo_v3_t *);
    nvmlReturn_t (*DeviceGetGpuFabricInfo)(nvmlDevice_t, nvmlGpuFabricInfo_t *);
} nvml_api;

/* ---- Loading: the library stays open and resolved until another path is asked for. ---- */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *lib_handle;
static char lib_path[1024];
static nvml_api api;
static const char *processes_symbol; /* which DeviceGetComputeRunningProcesses was found */
static size_t process_info_size;     /* the size of the struct that function fills */

#define DEFAULT_LIBRARY "libnvidia-ml.so.1"

static int release_locked(void);

/* dlsym returns an object pointer; copying its bytes into the function pointer is the
 * POSIX-sanctioned way to turn it into one. */
#define RESOLVE(field, symbol)                                  \
    do {                                                        \
        void *sym_ = dlsym(lib_handle, symbol);                 \
        memcpy(&api.field, &sym_, sizeof sym_);                 \
    } while (0)

static void set_error(pn_nvml_error *err, int code, const char *function)
{
    err->code = code;
    snprintf(err->function, sizeof err->function, "%s", function);
}

static int load_library(const char *path, pn_nvml_snapshot *out)
{
    if (lib_handle != NULL && strcmp(path, lib_path) == 0)
        return 0;
    if (lib_handle != NULL) {
        (void)release_locked(); /* the session belongs to the library being closed */
        dlclose(lib_handle);
        lib_handle = NULL;
    }
    memset(&api, 0, sizeof api);
    lib_path[0] = '\0';
    lib_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib_handle == NULL) {
        const char *why = dlerror();
        set_error(&out->error, NVML_ERROR_LIBRARY_NOT_FOUND, "dlopen");
        snprintf(out->detail, sizeof out->detail, "%s", why ? why : path);
        return -1;
    }
    RESOLVE(Init, "nvmlInit_v2");
    RESOLVE(Shutdown, "nvmlShutdown");
    RESOLVE(DeviceGetCount, "nvmlDeviceGetCount_v2");
    RESOLVE(DeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2");
    RESOLVE(SystemGetDriverVersion, "nvmlSystemGetDriverVersion");
    RESOLVE(DeviceGetName, "nvmlDeviceGetName");
    RESOLVE(DeviceGetUUID, "nvmlDeviceGetUUID");
    RESOLVE(DeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3");
    RESOLVE(DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo");
    RESOLVE(DeviceGetMemoryInfoV2, "nvmlDeviceGetMemoryInfo_v2");
    static const char *const process_symbols[] = {"nvmlDeviceGetComputeRunningProcesses_v3",
                                                  "nvmlDeviceGetComputeRunningProcesses_v2",
                                                  "nvmlDeviceGetComputeRunningProcesses"};
    processes_symbol = NULL;
    for (size_t k = 0; k < 3 && api.DeviceGetComputeRunningProcesses == NULL; k++) {
        RESOLVE(DeviceGetComputeRunningProcesses, process_symbols[k]);
        processes_symbol = process_symbols[k];
        process_info_size = k < 2 ? sizeof(nvmlProcessInfo_v2_t) : sizeof(nvmlProcessInfo_v1_t);
    }
    RESOLVE(DeviceGetNumaNodeId, "nvmlDeviceGetNumaNodeId");
    RESOLVE(DeviceGetMemoryAffinity, "nvmlDeviceGetMemoryAffinity");
    RESOLVE(DeviceGetCpuAffinityWithinScope, "nvmlDeviceGetCpuAffinityWithinScope");
    RESOLVE(DeviceGetCpuAffinity, "nvmlDeviceGetCpuAffinity");
    RESOLVE(DeviceGetCudaComputeCapability, "nvmlDeviceGetCudaComputeCapability");
    RESOLVE(DeviceGetMigMode, "nvmlDeviceGetMigMode");
    RESOLVE(DeviceGetMaxMigDeviceCount, "nvmlDeviceGetMaxMigDeviceCount");
    RESOLVE(DeviceGetMigDeviceHandleByIndex, "nvmlDeviceGetMigDeviceHandleByIndex");
    RESOLVE(DeviceGetGpuInstanceId, "nvmlDeviceGetGpuInstanceId");
    RESOLVE(DeviceGetComputeInstanceId, "nvmlDeviceGetComputeInstanceId");
    RESOLVE(DeviceGetTopologyCommonAncestor, "nvmlDeviceGetTopologyCommonAncestor");
    RESOLVE(DeviceGetP2PStatus, "nvmlDeviceGetP2PStatus");
    RESOLVE(DeviceGetNvLinkState, "nvmlDeviceGetNvLinkState");
    RESOLVE(DeviceGetNvLinkRemotePciInfo, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    RESOLVE(DeviceGetNvLinkRemoteDeviceType, "nvmlDeviceGetNvLinkRemoteDeviceType");
    RESOLVE(DeviceGetGpuFabricInfoV, "nvmlDeviceGetGpuFabricInfoV");
    RESOLVE(DeviceGetGpuFabricInfo, "nvmlDeviceGetGpuFabricInfo");
    snprintf(lib_path, sizeof lib_path, "%s", path);
    return 0;
}

static int check_required(pn_nvml_snapshot *out)
{
    static const char *names[] = {"nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetCount_v2",
                                  "nvmlDeviceGetHandleByIndex_v2"};
    const int present[] = {api.Init != NULL, api.Shutdown != NULL, api.DeviceGetCount != NULL,
                           api.DeviceGetHandleByIndex != NULL};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!present[i]) {
            set_error(&out->error, NVML_ERROR_FUNCTION_NOT_FOUND, names[i]);
            snprintf(out->detail, sizeof out->detail, "%s", lib_path);
            return -1;
        }
    }
    return 0;
}

/* ---- Per-device queries. A call either reads its value (1) or not (0); "not supported"
 * (or a symbol the driver lacks) is a normal absence, anything else is the device's error
 * (the first one is kept). A lost GPU is not asked anything further. ---- */

static int lost(const pn_nvml_error *err)
{
    return err->code == NVML_ERROR_GPU_IS_LOST;
}

static int outcome(pn_nvml_error *err, nvmlReturn_t rc, const char *function)
{
    if (rc == NVML_SUCCESS)
        return 1;
    if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND && err->code == 0)
        set_error(err, rc, function);
    return 0;
}

#define CALL(err, fn, symbol, ...) \
    (api.fn != NULL && !lost(err) && outcome((err), api.fn(__VA_ARGS__), (symbol)))

/* dst has PN_NVML_BUSID bytes; NVML may leave either field unterminated when full. */
static void copy_bus_id(char *dst, const nvmlPciInfo_t *pci)
{
    size_t n = strnlen(pci->busId, sizeof pci->busId);
    const char *src = pci->busId;
    if (n == 0) {
        src = pci->busIdLegacy;
        n = strnlen(src, sizeof pci->busIdLegacy);
    }
    if (n > PN_NVML_BUSID - 1)
        n = PN_NVML_BUSID - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void read_numa_and_cpus(nvmlDevice_t dev, pn_nvml_gpu *g)
{
    unsigned int node = 0;
    unsigned long nodeset[PN_NVML_CPUSET_WORDS];
    g->numa_node = -1;
    if (CALL(&g->error, DeviceGetNumaNodeId, "nvmlDeviceGetNumaNodeId", dev, &node)) {
        g->numa_node = (int)node;
    } else {
        memset(nodeset, 0, sizeof nodeset);
        if (CALL(&g->error, DeviceGetMemoryAffinity, "nvmlDeviceGetMemoryAffinity", dev,
                 PN_NVML_CPUSET_WORDS, nodeset, NVML_AFFINITY_SCOPE_NODE)) {
            for (int w = 0; w < PN_NVML_CPUSET_WORDS && g->numa_node < 0; w++)
                if (nodeset[w])
                    g->numa_node = w * 64 + __builtin_ctzl(nodeset[w]);
        }
    }
    if (CALL(&g->error, DeviceGetCpuAffinityWithinScope, "nvmlDeviceGetCpuAffinityWithinScope",
             dev, PN_NVML_CPUSET_WORDS, g->cpu_affinity, NVML_AFFINITY_SCOPE_NODE)) {
        g->has_cpu_affinity = 1;
    } else if (CALL(&g->error, DeviceGetCpuAffinity, "nvmlDeviceGetCpuAffinity", dev,
                    PN_NVML_CPUSET_WORDS, g->cpu_affinity)) {
        g->has_cpu_affinity = 1;
    }
}

/* Total and used memory in one call: nvmlDeviceGetMemoryInfo_v2 where the driver has it
 * (and answers it), else the v1 function. */
static int read_memory(nvmlDevice_t dev, pn_nvml_error *err, unsigned long long *total,
                       unsigned long long *used)
{
    if (api.DeviceGetMemoryInfoV2 != NULL && !lost(err)) {
        nvmlMemory_v2_t v2;
        memset(&v2, 0, sizeof v2);
        v2.version = NVML_MEMORY_V2;
        nvmlReturn_t rc = api.DeviceGetMemoryInfoV2(dev, &v2);
        if (rc == NVML_SUCCESS) {
            *total = v2.total;
            *used = v2.used;
            return 1;
        }
        if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND) {
            (void)outcome(err, rc, "nvmlDeviceGetMemoryInfo_v2");
            return 0;
        }
    }
    nvmlMemory_t v1;
    if (!CALL(err, DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo", dev, &v1))
        return 0;
    *total = v1.total;
    *used = v1.used;
    return 1;
}

/* The process list is read into this buffer first (under the lock): NVML's count is only
 * known after a call, and a device may report more than the snapshot has room for. */
static union {
    nvmlProcessInfo_v2_t v2[PN_NVML_PROC_CAP];
    nvmlProcessInfo_v1_t v1[PN_NVML_PROC_CAP];
} process_buffer;

/* The compute processes of one device. The first call offers room for the usual few; on
 * NVML_ERROR_INSUFFICIENT_SIZE the call is repeated with the count NVML reported, a few
 * times at most (processes may start between two calls), and never past
 * PN_NVML_PROC_CAP. What still does not fit becomes the device's error. Entries go to the
 * snapshot's shared arrays while they have room; p->total keeps NVML's count. */
static void read_processes(nvmlDevice_t dev, pn_nvml_error *err, pn_nvml_procs *p,
                           pn_nvml_snapshot *out)
{
    unsigned int count = PN_NVML_PROC_FIRST, offered = 0;
    nvmlReturn_t rc = NVML_ERROR_INSUFFICIENT_SIZE;
    memset(p, 0, sizeof *p);
    if (api.DeviceGetComputeRunningProcesses == NULL || lost(err))
        return;
    for (int attempt = 0; attempt < PN_NVML_PROC_TRIES && rc == NVML_ERROR_INSUFFICIENT_SIZE &&
                          count <= PN_NVML_PROC_CAP;
         attempt++) {
        offered = count;
        rc = api.DeviceGetComputeRunningProcesses(dev, &count, &process_buffer);
    }
    if (!outcome(err, rc, processes_symbol))
        return;
    if (count > offered) /* a driver that claims to have filled more than it was offered */
        count = offered;
    p->read = 1;
    p->first = out->process_count;
    p->total = count;
    const unsigned int room = PN_NVML_MAX_PROCS - out->process_count;
    p->count = count < room ? count : room;
    unsigned int *pid = &out->process_pid[p->first];
    unsigned long long *used = &out->process_used[p->first];
    for (unsigned int k = 0; k < p->count; k++) {
        if (process_info_size == sizeof(nvmlProcessInfo_v1_t)) {
            pid[k] = process_buffer.v1[k].pid;
            used[k] = process_buffer.v1[k].usedGpuMemory;
        } else {
            pid[k] = process_buffer.v2[k].pid;
            used[k] = process_buffer.v2[k].usedGpuMemory;
        }
    }
    out->process_count += p->count;
}

static void read_mig(nvmlDevice_t dev, pn_nvml_gpu *g, pn_nvml_snapshot *out)
{
    unsigned int current = 0, pending = 0, max = 0;
    if (!CALL(&g->error, DeviceGetMigMode, "nvmlDeviceGetMigMode", dev, &current, &pending))
        return;
    g->mig_mode = current == NVML_DEVICE_MIG_ENABLE;
    if (!g->mig_mode ||
        !CALL(&g->error, DeviceGetMaxMigDeviceCount, "nvmlDeviceGetMaxMigDeviceCount", dev, &max))
        return;
    g->mig_slots = max;
    /* Slots past the capacity are not asked for: a driver answering 2^32-1 with every slot
     * empty would otherwise keep this loop busy for hours. */
    for (unsigned int slot = 0; slot < max && slot < PN_NVML_MAX_MIG; slot++) {
        nvmlDevice_t mig_dev = NULL;
        nvmlReturn_t rc;
        if (api.DeviceGetMigDeviceHandleByIndex == NULL || lost(&g->error))
            return;
        rc = api.DeviceGetMigDeviceHandleByIndex(dev, slot, &mig_dev);
        if (rc == NVML_ERROR_NOT_FOUND)
            continue; /* an unpopulated slot */
        pn_nvml_mig *m = &g->mig[g->mig_count++];
        m->slot = slot;
        m->gpu_instance_id = -1;
        m->compute_instance_id = -1;
        if (!outcome(&m->error, rc, "nvmlDeviceGetMigDeviceHandleByIndex"))
            continue;
        unsigned int id = 0;
        (void)CALL(&m->error, DeviceGetUUID, "nvmlDeviceGetUUID", mig_dev, m->uuid, sizeof m->uuid);
        (void)CALL(&m->error, DeviceGetName, "nvmlDeviceGetName", mig_dev, m->name, sizeof m->name);
        m->has_memory = read_memory(mig_dev, &m->error, &m->memory_total, &m->memory_used);
        if (CALL(&m->error, DeviceGetGpuInstanceId, "nvmlDeviceGetGpuInstanceId", mig_dev, &id))
            m->gpu_instance_id = (int)id;
        if (CALL(&m->error, DeviceGetComputeInstanceId, "nvmlDeviceGetComputeInstanceId",
                 mig_dev, &id))
            m->compute_instance_id = (int)id;
        /* Per MIG device: on the parent, NVML lists them only to privileged callers. */
        read_processes(mig_dev, &m->error, &m->procs, out);
    }
}

/* Active NVLinks as read, before they are matched to GPUs (only used under the lock). */
typedef struct {
    unsigned long long remote;        /* bus_key() of the far end, 0 if unparsable */
    int remote_type;                  /* nvmlIntNvLinkDeviceType_t, -1 when not reported */
} raw_link;

static raw_link raw_links[PN_NVML_MAX_GPUS][PN_NVML_MAX_LINKS];
static unsigned int raw_link_count[PN_NVML_MAX_GPUS];

#define NVLINK_DEVICE_TYPE_GPU 0
#define NVLINK_DEVICE_TYPE_SWITCH 2

/* "00000000:18:00.0" -> one number (domain, bus, device, function), so bus ids compare
 * whatever their case or domain width; 0 when it does not parse. */
static int hex_field(const char **p, char end, unsigned long long *value)
{
    const char *s = *p;
    unsigned long long v = 0;
    int digits = 0;
    for (;; s++, digits++) {
        int d = (*s >= '0' && *s <= '9')   ? *s - '0'
                : (*s >= 'a' && *s <= 'f') ? *s - 'a' + 10
                : (*s >= 'A' && *s <= 'F') ? *s - 'A' + 10
                                           : -1;
        if (d < 0)
            break;
        if (digits >= 8)
            return 0;
        v = v << 4 | (unsigned long long)d;
    }
    if (digits == 0 || *s != end)
        return 0;
    *p = s + (end != '\0');
    *value = v;
    return 1;
}

/* (sscanf would do, but it costs more than the rest of a GPU's NVLink bookkeeping.) */
static unsigned long long bus_key(const char *bus_id)
{
    unsigned long long domain, bus, device, function;
    const char *p = bus_id;
    if (!hex_field(&p, ':', &domain) || !hex_field(&p, ':', &bus) || !hex_field(&p, '.', &device) ||
        !hex_field(&p, '\0', &function) || bus > 0xff || device > 0xff || function > 0xff)
        return 0;
    return (domain << 24 | bus << 16 | device << 8 | function) + 1;
}

static void read_nvlinks(nvmlDevice_t dev, pn_nvml_gpu *g)
{
    raw_link *links = raw_links[g->index];
    for (unsigned int link = 0; link < PN_NVML_MAX_LINKS; link++) {
        int active = 0;
        nvmlPciInfo_t pci;
        char bus_id[PN_NVML_BUSID];
        if (api.DeviceGetNvLinkState == NULL || lost(&g->error))
            return;
        nvmlReturn_t rc = api.DeviceGetNvLinkState(dev, link, &active);
        /* NOT_SUPPORTED: no NVLink on this GPU; INVALID_ARGUMENT: past its last link. */
        if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT)
            return;
        if (!outcome(&g->error, rc, "nvmlDeviceGetNvLinkState"))
            return;
        if (active != NVML_FEATURE_ENABLED)
            continue;
        /* The far end's type first: a link into an NVSwitch needs no bus id (a DGX has 18
         * of them per GPU, and each query is a round trip into the driver). */
        int type = 0, remote_type = -1;
        if (CALL(&g->error, DeviceGetNvLinkRemoteDeviceType, "nvmlDeviceGetNvLinkRemoteDeviceType",
                 dev, link, &type))
            remote_type = type;
        unsigned long long remote = 0;
        if (remote_type != NVLINK_DEVICE_TYPE_SWITCH) {
            memset(&pci, 0, sizeof pci);
            if (!CALL(&g->error, DeviceGetNvLinkRemotePciInfo,
                      "nvmlDeviceGetNvLinkRemotePciInfo_v2", dev, link, &pci))
                continue;
            copy_bus_id(bus_id, &pci);
            remote = bus_key(bus_id);
        }
        raw_link *l = &links[raw_link_count[g->index]++];
        l->remote = remote;
        l->remote_type = remote_type;
    }
}

/* A link ends at a peer GPU when the far bus id is a GPU of this node (and the driver
 * does not say otherwise); at the fabric when the far end is an NVSwitch, or, on drivers
 * that cannot tell, anything that is not a GPU of this node. */
static void match_nvlinks(pn_nvml_snapshot *out)
{
    unsigned long long keys[PN_NVML_MAX_GPUS];
    const unsigned int n = out->gpu_count;
    for (unsigned int i = 0; i < n; i++)
        keys[i] = bus_key(out->gpus[i].pci_bus_id);
    for (unsigned int i = 0; i < n; i++) {
        pn_nvml_gpu *g = &out->gpus[i];
        for (unsigned int k = 0; k < raw_link_count[i]; k++) {
            const raw_link *l = &raw_links[i][k];
            int peer = -1;
            for (unsigned int j = 0; l->remote && j < n && peer < 0; j++)
                if (keys[j] == l->remote)
                    peer = (int)j;
            if (l->remote_type == NVLINK_DEVICE_TYPE_SWITCH || (l->remote_type < 0 && peer < 0))
                g->nvswitch_links++;
            else if (peer >= 0 && (unsigned int)peer != i &&
                     (l->remote_type == NVLINK_DEVICE_TYPE_GPU || l->remote_type < 0))
                g->nvlink_to[peer]++;
        }
    }
    int *pair = out->pairs;
    for (unsigned int i = 0; i < n; i++) {
        const pn_nvml_gpu *a = &out->gpus[i];
        for (unsigned int j = i + 1; j < n; j++, pair += 5) {
            const pn_nvml_gpu *b = &out->gpus[j];
            unsigned int links = a->nvlink_to[j] ? a->nvlink_to[j] : b->nvlink_to[i];
            if (links == 0 && a->nvswitch_links && b->nvswitch_links)
                links = a->nvswitch_links < b->nvswitch_links ? a->nvswitch_links
                                                              : b->nvswitch_links;
            pair[3] = (int)links;
        }
    }
}

/* The GPU's NVLink fabric: nvmlDeviceGetGpuFabricInfoV with the newest struct version the
 * driver knows (v3, then v2 on ARGUMENT_VERSION_MISMATCH), else the legacy call. */
static void read_fabric(nvmlDevice_t dev, pn_nvml_gpu *g)
{
    static const unsigned int versions[] = {NVML_GPU_FABRIC_INFO_V3, NVML_GPU_FABRIC_INFO_V2};
    if (lost(&g->error))
        return;
    for (size_t k = 0; api.DeviceGetGpuFabricInfoV != NULL && k < 2; k++) {
        nvmlGpuFabricInfo_v3_t info;
        memset(&info, 0, sizeof info);
        info.version = versions[k];
        nvmlReturn_t rc = api.DeviceGetGpuFabricInfoV(dev, &info);
        if (rc == NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            continue;
        if (rc == NVML_ERROR_FUNCTION_NOT_FOUND)
            break; /* as a driver without the symbol: the legacy call */
        if (!outcome(&g->error, rc, "nvmlDeviceGetGpuFabricInfoV"))
            return;
        /* A GPU outside an NVLink fabric (an H200 in a PCIe or HGX box) answers SUCCESS
         * with state NOT_SUPPORTED and a zero cluster UUID: the driver reports none. */
        if (info.state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED)
            return;
        g->has_fabric = 1;
        memcpy(g->fabric_cluster_uuid, info.clusterUuid, sizeof info.clusterUuid);
        g->fabric_status = info.status;
        g->fabric_clique_id = info.cliqueId;
        g->fabric_state = info.state;
        g->fabric_health_mask = info.healthMask;
        return;
    }
    nvmlGpuFabricInfo_t legacy;
    memset(&legacy, 0, sizeof legacy);
    if (!CALL(&g->error, DeviceGetGpuFabricInfo, "nvmlDeviceGetGpuFabricInfo", dev, &legacy) ||
        legacy.state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED)
        return;
    g->has_fabric = 1;
    memcpy(g->fabric_cluster_uuid, legacy.clusterUuid, sizeof legacy.clusterUuid);
    g->fabric_status = legacy.status;
    g->fabric_clique_id = legacy.cliqueId;
    g->fabric_state = legacy.state;
}

static void read_gpu(unsigned int index, nvmlDevice_t *handle, pn_nvml_gpu *g,
                     pn_nvml_snapshot *out)
{
    nvmlPciInfo_t pci;
    int major = 0, minor = 0;
    memset(g, 0, sizeof *g);
    raw_link_count[index] = 0;
    g->index = index;
    g->numa_node = -1;
    g->cc_major = -1;
    g->cc_minor = -1;
    if (!outcome(&g->error, api.DeviceGetHandleByIndex(index, handle),
                 "nvmlDeviceGetHandleByIndex_v2"))
        return;
    g->has_handle = 1;
    nvmlDevice_t dev = *handle;
    (void)CALL(&g->error, DeviceGetName, "nvmlDeviceGetName", dev, g->name, sizeof g->name);
    (void)CALL(&g->error, DeviceGetUUID, "nvmlDeviceGetUUID", dev, g->uuid, sizeof g->uuid);
    memset(&pci, 0, sizeof pci);
    if (CALL(&g->error, DeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3", dev, &pci))
        copy_bus_id(g->pci_bus_id, &pci);
    g->has_memory = read_memory(dev, &g->error, &g->memory_total, &g->memory_used);
    read_numa_and_cpus(dev, g);
    if (CALL(&g->error, DeviceGetCudaComputeCapability, "nvmlDeviceGetCudaComputeCapability", dev,
             &major, &minor)) {
        g->cc_major = major;
        g->cc_minor = minor;
    }
    read_mig(dev, g, out);
    if (!g->mig_mode)
        read_processes(dev, &g->error, &g->procs, out);
    read_nvlinks(dev, g);
    read_fabric(dev, g);
}

/* Fills out->pairs in (i, j) order; match_nvlinks adds the NVLink counts. */
static void read_pairs(const nvmlDevice_t *handles, pn_nvml_snapshot *out)
{
    const unsigned int n = out->gpu_count;
    int *pair = out->pairs;
    for (unsigned int i = 0; i < n; i++) {
        const pn_nvml_gpu *a = &out->gpus[i];
        const int a_ok = a->has_handle && !lost(&a->error);
        for (unsigned int j = i + 1; j < n; j++, pair += 5) {
            const pn_nvml_gpu *b = &out->gpus[j];
            int value = 0;
            pair[0] = (int)i;
            pair[1] = (int)j;
            pair[2] = -1;
            pair[3] = 0;
            pair[4] = -1;
            if (!a_ok || !b->has_handle || lost(&b->error))
                continue;
            if (api.DeviceGetTopologyCommonAncestor != NULL &&
                api.DeviceGetTopologyCommonAncestor(handles[i], handles[j], &value) ==
                    NVML_SUCCESS)
                pair[2] = value;
            if (api.DeviceGetP2PStatus != NULL &&
                api.DeviceGetP2PStatus(handles[i], handles[j], NVML_P2P_CAPS_INDEX_READ,
                                       &value) == NVML_SUCCESS)
                pair[4] = value;
        }
    }
    out->pair_count = (unsigned int)(pair - out->pairs) / 5;
}

/* ---- The NVML session: initialised on first use and held (one reference of NVML's
 * reference-counted init) until pn_nvml_release(), so a snapshot does not pay for
 * nvmlInit + nvmlShutdown (10 ms on a real driver, 20 times the read itself). A failed
 * init is never kept; a forked child (another pid) does not use its parent's session. ---- */
static int held;
static pid_t held_pid;

/* A fork while another thread reads would leave the lock held in the child forever: the
 * lock is taken across fork(), and the child lets go of the parent's session. */
static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_parent(void) { pthread_mutex_unlock(&lock); }
static void fork_child(void)
{
    held = 0;
    pthread_mutex_unlock(&lock);
}
static pthread_once_t fork_handlers = PTHREAD_ONCE_INIT;
static void install_fork_handlers(void)
{
    (void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static int holding(void)
{
    return held && held_pid == getpid();
}

/* Under the lock; the library is loaded. Returns 0, or nvmlInit's code (also in out). */
static int acquire(pn_nvml_snapshot *out)
{
    if (holding())
        return 0;
    held = 0;
    nvmlReturn_t rc = api.Init();
    if (rc != NVML_SUCCESS) {
        set_error(&out->error, rc, "nvmlInit");
        return rc;
    }
    held = 1;
    held_pid = getpid();
    return 0;
}

/* Under the lock: give the session's reference back; nvmlShutdown's code, 0 if none held. */
static int release_locked(void)
{
    int rc = 0;
    if (holding() && api.Shutdown != NULL)
        rc = api.Shutdown();
    held = 0;
    return rc;
}

/* What a held session answers once the driver dropped it (unloaded, reset, GPU fallen off
 * the bus): the read is worth one more try on a fresh init. */
static int dropped_code(int code)
{
    return code == NVML_ERROR_UNINITIALIZED || code == NVML_ERROR_DRIVER_NOT_LOADED ||
           code == NVML_ERROR_GPU_IS_LOST;
}

static int session_dropped(const pn_nvml_snapshot *out)
{
    if (dropped_code(out->error.code))
        return 1;
    for (unsigned int i = 0; i < out->gpu_count; i++) {
        const pn_nvml_gpu *g = &out->gpus[i];
        if (dropped_code(g->error.code))
            return 1;
        for (unsigned int k = 0; k < g->mig_count; k++)
            if (dropped_code(g->mig[k].error.code))
                return 1;
    }
    return 0;
}

/* Only what is filled is cleared: the GPU entries past gpu_count and the pairs past
 * (gpu_count, gpu_count) are never read, and clearing 300 KB would cost more than the
 * snapshot itself. */
static void clear_output(pn_nvml_snapshot *out)
{
    memset(&out->error, 0, sizeof out->error);
    out->detail[0] = '\0';
    out->driver[0] = '\0';
    out->device_count = 0;
    out->gpu_count = 0;
    out->pair_count = 0;
    out->process_count = 0;
}

/* Under the lock, NVML initialised: the driver version, the devices and their pairs. */
static int read_devices(pn_nvml_snapshot *out)
{
    nvmlDevice_t handles[PN_NVML_MAX_GPUS];
    unsigned int count = 0;
    /* NVML's buffer size, as nvidia-ml-py passes it, so both backends agree on a long one. */
    if (api.SystemGetDriverVersion != NULL &&
        api.SystemGetDriverVersion(out->driver, PN_NVML_DRIVER) != NVML_SUCCESS)
        out->driver[0] = '\0';
    nvmlReturn_t rc = api.DeviceGetCount(&count);
    if (rc != NVML_SUCCESS) {
        set_error(&out->error, rc, "nvmlDeviceGetCount_v2");
        return rc;
    }
    out->device_count = count;
    out->gpu_count = count < PN_NVML_MAX_GPUS ? count : PN_NVML_MAX_GPUS;
    memset(handles, 0, sizeof handles);
    for (unsigned int i = 0; i < out->gpu_count; i++)
        read_gpu(i, &handles[i], &out->gpus[i], out);
    read_pairs(handles, out);
    match_nvlinks(out);
    return 0;
}

static int read_locked(const char *path, pn_nvml_snapshot *out)
{
    if (load_library(path, out) != 0 || check_required(out) != 0)
        return out->error.code;
    const int fresh = !holding();
    int rc = acquire(out);
    if (rc != 0)
        return rc;
    rc = read_devices(out);
    if (!fresh && session_dropped(out)) {
        /* The session was dropped under us: let it go, init again, read once more. */
        (void)release_locked();
        clear_output(out);
        rc = acquire(out);
        if (rc == 0)
            rc = read_devices(out);
    }
    return rc;
}

/* ---- Host facts. ---- */

/* NUMA nodes do not come and go: the count is kept while the node directory is the same
 * one, unchanged (inode, modification time), which a stat tells for a seventh of the cost
 * of reading it. (Called under the lock.) */
static int count_numa_nodes(const char *sysfs_root)
{
    static char counted_path[1100];
    static struct stat counted_stat;
    static int counted = 0;
    char path[1100];
    struct stat now;
    int count = 0;
    snprintf(path, sizeof path, "%s/devices/system/node", sysfs_root);
    if (stat(path, &now) != 0)
        return 1;
    if (counted > 0 && strcmp(path, counted_path) == 0 && now.st_ino == counted_stat.st_ino &&
        now.st_dev == counted_stat.st_dev && now.st_mtim.tv_sec == counted_stat.st_mtim.tv_sec &&
        now.st_mtim.tv_nsec == counted_stat.st_mtim.tv_nsec)
        return counted;
    DIR *dir = opendir(path);
    if (dir == NULL)
        return 1;
    for (struct dirent *e = readdir(dir); e != NULL; e = readdir(dir)) {
        const char *p = e->d_name;
        if (strncmp(p, "node", 4) != 0 || p[4] == '\0')
            continue;
        for (p += 4; *p >= '0' && *p <= '9'; p++)
            ;
        count += *p == '\0';
    }
    closedir(dir);
    counted = count > 0 ? count : 1;
    counted_stat = now;
    snprintf(counted_path, sizeof counted_path, "%s", path);
    return counted;
}

/* The IPv4 default route with the lowest metric (ties: interface name), as in
 * /proc/net/route: Iface Destination Gateway Flags RefCnt Use Metric Mask ... (hex). */
static void default_route(char *iface, size_t size)
{
    char line[512], best[32] = "", name[32];
    long best_metric = 0;
    unsigned long destination, gateway, flags, mask;
    long refcnt, use, metric;
    FILE *f = fopen("/proc/net/route", "r");
    iface[0] = '\0';
    if (f == NULL)
        return;
    if (fgets(line, sizeof line, f) == NULL) { /* header */
        fclose(f);
        return;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "%31s %lx %lx %lx %ld %ld %ld %lx", name, &destination, &gateway,
                   &flags, &refcnt, &use, &metric, &mask) != 8)
            continue;
        if (destination != 0 || mask != 0 || !(flags & 0x1 /* RTF_UP */))
            continue;
        if (best[0] == '\0' || metric < best_metric ||
            (metric == best_metric && strcmp(name, best) < 0)) {
            snprintf(best, sizeof best, "%s", name);
            best_metric = metric;
        }
    }
    fclose(f);
    snprintf(iface, size, "%s", best);
}

/* The socket SIOCGIFADDR is asked through, opened once (under the lock) and kept. */
static int ioctl_socket = -1;

static void interface_ipv4(const char *iface, char *out, size_t size)
{
    struct ifreq req;
    out[0] = '\0';
    if (ioctl_socket < 0)
        ioctl_socket = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const int fd = ioctl_socket;
    if (fd < 0)
        return;
    memset(&req, 0, sizeof req);
    memcpy(req.ifr_name, iface, strnlen(iface, sizeof req.ifr_name - 1));
    if (ioctl(fd, SIOCGIFADDR, &req) == 0) {
        const struct sockaddr_in *addr = (const struct sockaddr_in *)(const void *)&req.ifr_addr;
        if (inet_ntop(AF_INET, &addr->sin_addr, out, (socklen_t)size) == NULL ||
            strncmp(out, "127.", 4) == 0)
            out[0] = '\0';
    }
}

/* The default route and its address are read again only after the kernel announced a
 * change of links, IPv4 addresses or IPv4 routes on this netlink socket, which is bound
 * before the first read, so no change goes unseen. Where it cannot be opened, every call
 * reads. A forked child opens its own: the parent's would be drained by both. (All of it
 * under the lock.) */
static int route_watch = -1;
static pid_t route_watch_pid;
static char route_iface[32], route_ip[64];

static int route_changed(void)
{
    char message[4096];
    int changed = 0;
    if (route_watch >= 0 && route_watch_pid != getpid()) {
        close(route_watch);
        route_watch = -1;
    }
    if (route_watch < 0) {
        struct sockaddr_nl group;
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
        if (fd < 0)
            return 1;
        memset(&group, 0, sizeof group);
        group.nl_family = AF_NETLINK;
        group.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE;
        if (bind(fd, (const struct sockaddr *)&group, sizeof group) != 0) {
            close(fd);
            return 1;
        }
        route_watch = fd;
        route_watch_pid = getpid();
        return 1;
    }
    for (;;) {
        ssize_t n = recv(route_watch, message, sizeof message, MSG_DONTWAIT);
        if (n > 0 || (n < 0 && errno == ENOBUFS)) { /* ENOBUFS: announcements were lost */
            changed = 1;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            close(route_watch);
            route_watch = -1;
            changed = 1;
        }
        return changed;
    }
}

/* Online CPUs as sysconf(_SC_NPROCESSORS_ONLN) counts them, from the cpu list in
 * /sys/devices/system/cpu/online, kept open and read again from its start (a sysfs file
 * is regenerated by each read at offset 0), which saves an open and a close per call.
 * Where the file cannot be read or parsed, sysconf answers. */
static int online_cpus_fd = -2;

static long online_cpus(void)
{
    char text[4096];
    long count = 0;
    if (online_cpus_fd == -2)
        online_cpus_fd = open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);
    ssize_t n = online_cpus_fd >= 0 ? pread(online_cpus_fd, text, sizeof text - 1, 0) : -1;
    if (n <= 0 || n == (ssize_t)sizeof text - 1)
        return sysconf(_SC_NPROCESSORS_ONLN);
    text[n] = '\0';
    for (const char *p = text; *p && *p != '\n';) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p)
            return sysconf(_SC_NPROCESSORS_ONLN);
        if (*end == '-') {
            p = end + 1;
            hi = strtol(p, &end, 10);
            if (end == p || hi < lo)
                return sysconf(_SC_NPROCESSORS_ONLN);
        }
        count += hi - lo + 1;
        p = *end == ',' ? end + 1 : end;
    }
    return count > 0 ? count : sysconf(_SC_NPROCESSORS_ONLN);
}

static void read_host(const char *sysfs_root, pn_host *host)
{
    long cpus = online_cpus();
    memset(host, 0, sizeof *host);
    if (gethostname(host->hostname, sizeof host->hostname - 1) != 0)
        host->hostname[0] = '\0';
    host->cpus = cpus > 0 ? (int)cpus : 1;
    host->numa_nodes = count_numa_nodes(sysfs_root);
    if (route_changed()) {
        default_route(route_iface, sizeof route_iface);
        route_ip[0] = '\0';
        if (route_iface[0])
            interface_ipv4(route_iface, route_ip, sizeof route_ip);
    }
    memcpy(host->route_interface, route_iface, sizeof host->route_interface);
    memcpy(host->route_ip, route_ip, sizeof host->route_ip);
}

int pn_nvml_snapshot_read(const char *library_path, const char *sysfs_root,
                          pn_nvml_snapshot *out)
{
    const char *path = (library_path != NULL && library_path[0]) ? library_path : DEFAULT_LIBRARY;
    int rc;
    clear_output(out);
    (void)pthread_once(&fork_handlers, install_fork_handlers);
    pthread_mutex_lock(&lock);
    read_host((sysfs_root != NULL && sysfs_root[0]) ? sysfs_root : "/sys", &out->host);
    rc = read_locked(path, out);
    pthread_mutex_unlock(&lock);
    return rc;
}

int pn_nvml_release(void)
{
    pthread_mutex_lock(&lock);
    int rc = release_locked();
    pthread_mutex_unlock(&lock);
    return rc;
}

int pn_nvml_held(void)
{
    return holding();
}

void pn_nvml_forget(void)
{
    held = 0;
}
