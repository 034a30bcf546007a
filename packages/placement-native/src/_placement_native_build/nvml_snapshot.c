/* One-call NVML topology snapshot; see nvml_snapshot.h. */
#include "nvml_snapshot.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- The slice of the NVML ABI used here (values and layouts as in nvml.h). ---- */
typedef int nvmlReturn_t; /* enum nvmlReturn_enum */
#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
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
} nvml_api;

/* ---- Loading: the library stays open and resolved until another path is asked for. ---- */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *lib_handle;
static char lib_path[1024];
static nvml_api api;

#define DEFAULT_LIBRARY "libnvidia-ml.so.1"

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

static void read_mig(nvmlDevice_t dev, pn_nvml_gpu *g)
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
        nvmlMemory_t mem;
        unsigned int id = 0;
        (void)CALL(&m->error, DeviceGetUUID, "nvmlDeviceGetUUID", mig_dev, m->uuid, sizeof m->uuid);
        (void)CALL(&m->error, DeviceGetName, "nvmlDeviceGetName", mig_dev, m->name, sizeof m->name);
        if (CALL(&m->error, DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo", mig_dev, &mem)) {
            m->has_memory = 1;
            m->memory_total = mem.total;
        }
        if (CALL(&m->error, DeviceGetGpuInstanceId, "nvmlDeviceGetGpuInstanceId", mig_dev, &id))
            m->gpu_instance_id = (int)id;
        if (CALL(&m->error, DeviceGetComputeInstanceId, "nvmlDeviceGetComputeInstanceId",
                 mig_dev, &id))
            m->compute_instance_id = (int)id;
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
        memset(&pci, 0, sizeof pci);
        if (!CALL(&g->error, DeviceGetNvLinkRemotePciInfo, "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                  dev, link, &pci))
            continue;
        raw_link *l = &links[raw_link_count[g->index]++];
        copy_bus_id(bus_id, &pci);
        l->remote = bus_key(bus_id);
        l->remote_type = -1;
        int type = 0;
        if (CALL(&g->error, DeviceGetNvLinkRemoteDeviceType, "nvmlDeviceGetNvLinkRemoteDeviceType",
                 dev, link, &type))
            l->remote_type = type;
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

static void read_gpu(unsigned int index, nvmlDevice_t *handle, pn_nvml_gpu *g)
{
    nvmlPciInfo_t pci;
    nvmlMemory_t mem;
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
    if (CALL(&g->error, DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo", dev, &mem)) {
        g->has_memory = 1;
        g->memory_total = mem.total;
    }
    read_numa_and_cpus(dev, g);
    if (CALL(&g->error, DeviceGetCudaComputeCapability, "nvmlDeviceGetCudaComputeCapability", dev,
             &major, &minor)) {
        g->cc_major = major;
        g->cc_minor = minor;
    }
    read_mig(dev, g);
    read_nvlinks(dev, g);
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

static int read_locked(const char *path, pn_nvml_snapshot *out)
{
    nvmlDevice_t handles[PN_NVML_MAX_GPUS];
    nvmlReturn_t rc;
    unsigned int count = 0;

    if (load_library(path, out) != 0 || check_required(out) != 0)
        return out->error.code;
    rc = api.Init();
    if (rc != NVML_SUCCESS) {
        set_error(&out->error, rc, "nvmlInit");
        return rc;
    }
    /* NVML's buffer size, as nvidia-ml-py passes it, so both backends agree on a long one. */
    if (api.SystemGetDriverVersion != NULL &&
        api.SystemGetDriverVersion(out->driver, PN_NVML_DRIVER) != NVML_SUCCESS)
        out->driver[0] = '\0';
    rc = api.DeviceGetCount(&count);
    if (rc != NVML_SUCCESS) {
        set_error(&out->error, rc, "nvmlDeviceGetCount_v2");
        api.Shutdown();
        return rc;
    }
    out->device_count = count;
    out->gpu_count = count < PN_NVML_MAX_GPUS ? count : PN_NVML_MAX_GPUS;
    memset(handles, 0, sizeof handles);
    for (unsigned int i = 0; i < out->gpu_count; i++)
        read_gpu(i, &handles[i], &out->gpus[i]);
    read_pairs(handles, out);
    match_nvlinks(out);
    rc = api.Shutdown();
    if (rc != NVML_SUCCESS)
        set_error(&out->shutdown, rc, "nvmlShutdown");
    return 0;
}

/* ---- Host facts. ---- */

static int count_numa_nodes(const char *sysfs_root)
{
    char path[1100];
    int count = 0;
    snprintf(path, sizeof path, "%s/devices/system/node", sysfs_root);
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
    return count > 0 ? count : 1;
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

static void interface_ipv4(const char *iface, char *out, size_t size)
{
    struct ifreq req;
    out[0] = '\0';
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
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
    close(fd);
}

static void read_host(const char *sysfs_root, pn_host *host)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    memset(host, 0, sizeof *host);
    if (gethostname(host->hostname, sizeof host->hostname - 1) != 0)
        host->hostname[0] = '\0';
    host->cpus = cpus > 0 ? (int)cpus : 1;
    host->numa_nodes = count_numa_nodes(sysfs_root);
    default_route(host->route_interface, sizeof host->route_interface);
    if (host->route_interface[0])
        interface_ipv4(host->route_interface, host->route_ip, sizeof host->route_ip);
}

int pn_nvml_snapshot_read(const char *library_path, const char *sysfs_root,
                          pn_nvml_snapshot *out)
{
    const char *path = (library_path != NULL && library_path[0]) ? library_path : DEFAULT_LIBRARY;
    int rc;
    /* Only what is filled is cleared: the GPU entries past gpu_count and the pairs past
     * (gpu_count, gpu_count) are never read, and clearing 300 KB would cost more than the
     * snapshot itself. */
    memset(&out->error, 0, sizeof out->error);
    memset(&out->shutdown, 0, sizeof out->shutdown);
    out->detail[0] = '\0';
    out->driver[0] = '\0';
    out->device_count = 0;
    out->gpu_count = 0;
    out->pair_count = 0;
    read_host((sysfs_root != NULL && sysfs_root[0]) ? sysfs_root : "/sys", &out->host);
    pthread_mutex_lock(&lock);
    rc = read_locked(path, out);
    pthread_mutex_unlock(&lock);
    return rc;
}
