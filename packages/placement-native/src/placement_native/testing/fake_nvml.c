/* A fake libnvidia-ml.so.1 for tests: the NVML symbols placement-native (and nvidia-ml-py,
 * for the same data) calls, answering from a topology file named by FAKE_NVML_TOPOLOGY,
 * read at nvmlInit (again whenever the file changed). Built by the test suite with
 * gcc -shared -fPIC; with -DFAKE_OLD_DRIVER the optional symbols of newer drivers are
 * left out.
 *
 * Everything a query answers is prepared when the file is read, so a call costs about
 * what a cached answer of the real library costs.
 *
 * The library is one per process, and a caller may keep it initialised between reads:
 * when FAKE_NVML_TOPOLOGY names another file, or the file changed, the next
 * nvmlDeviceGetCount_v2 of an initialised library answers UNINITIALIZED and drops every
 * reference, as a driver that was reloaded would; the next nvmlInit reads the new node.
 * The exported counters fake_nvml_init_count and fake_nvml_shutdown_count (ints) count
 * the calls to nvmlInit (any flavour) and nvmlShutdown, failed ones included.
 *
 * Topology file, one directive per line ('#' starts a comment):
 *   init CODE                      nvmlInit's return code (default 0)
 *   init_delay_us N                what every nvmlInit costs, in microseconds of CPU time
 *                                  spent busy (default 0): a real driver's init and
 *                                  shutdown cost about 10 ms
 *   count_error CODE               nvmlDeviceGetCount_v2's return code
 *   count N                        the device count answered, whatever GPUs are declared
 *                                  (handles past the declared ones: INVALID_ARGUMENT)
 *   shutdown CODE                  nvmlShutdown's return code (default 0)
 *   driver VERSION                 (bytes as written: not checked for UTF-8)
 *   gpu I name TEXT...             declares GPU I (device count = highest I + 1)
 *   gpu I uuid|bus TEXT
 *   gpu I mem BYTES
 *   gpu I used BYTES [RESERVED]    memory in use (default 0); nvmlMemory_v2_t reports it
 *                                  and the reserved bytes apart, v1's used adds them up
 *   gpu I proc PID USED [SLOT]     a compute process using USED bytes ("na": NVML's
 *                                  not-available value) on the GPU, or on its MIG device
 *                                  in SLOT (whose used memory is its processes' sum);
 *                                  listed in the order written
 *   gpu I churn BYTES              every snapshot (each nvmlDeviceGetCount_v2) moves the
 *                                  memory in use by BYTES, that of
 *                                  the GPU and of each process on the GPU itself, starting
 *                                  over from the declared values before the GPU's would pass
 *                                  its total memory: a GPU busy with work that grows
 *   gpu I procrace N               the first N process queries of each snapshot (after each
 *                                  nvmlDeviceGetCount_v2) find one
 *                                  more process than the room offered: they answer
 *                                  INSUFFICIENT_SIZE with that count
 *   gpu I numa NODE                (without it: NUMA queries are NOT_SUPPORTED)
 *   gpu I cpus CPULIST             (without it: CPU affinity is NOT_SUPPORTED)
 *   gpu I cc MAJOR MINOR
 *   gpu I mig 0|1                  current MIG mode (without it: NOT_SUPPORTED)
 *   gpu I migslots N               nvmlDeviceGetMaxMigDeviceCount (up to 2^32-1; slots
 *                                  without a migdev answer NOT_FOUND)
 *   gpu I migdev SLOT GI CI BYTES UUID NAME...
 *   gpu I links N                  NVLink slots (without it: NOT_SUPPORTED at link 0)
 *   gpu I nvlink LINK ACTIVE TYPE REMOTE_BUS   TYPE: 0 GPU, 2 NVSwitch
 *   gpu I fail FUNCTION CODE       FUNCTION returns CODE for this GPU (a failure of
 *                                  nvmlDeviceGetMemoryInfo also fails its _v2)
 *   gpu I fabric UUIDHEX CLIQUE STATE STATUS HEALTH
 *                                  the GPU's NVLink fabric: cluster UUID as 32 hex digits,
 *                                  clique id, nvmlGpuFabricState_t, nvmlReturn_t status,
 *                                  health mask (without it: fabric info is NOT_SUPPORTED)
 *   fabric_version N               the newest nvmlGpuFabricInfo struct version the driver
 *                                  knows (default 3; 1: every tag is a version mismatch);
 *                                  a tag of another version or size answers
 *                                  ARGUMENT_VERSION_MISMATCH, as NVML does
 *                                  (FAKE_OLD_DRIVER builds have no fabric symbols at all)
 *   topo I J LEVEL                 nvmlGpuTopologyLevel_t of the pair (both orders)
 *   p2p I J STATUS                 nvmlGpuP2PStatus_t of the pair (both orders)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_GPUS 64
#define MAX_MIG 8
#define MAX_LINKS 36
#define MAX_FAILS 8
#define MAX_PROCS 16384 /* processes of the whole node */
#define NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFULL

typedef int nvmlReturn_t;
enum {
    OK = 0,
    E_UNINIT = 1,
    E_INVALID = 2,
    E_NOT_SUPPORTED = 3,
    E_NOT_FOUND = 6,
    E_INSUFFICIENT = 7,
    E_VERSION_MISMATCH = 25,
};

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct {
    int gpu, slot; /* slot -1: the GPU itself */
    unsigned int pid;
    unsigned long long used;
} fake_proc;

typedef struct {
    int is_mig;
    int gpu; /* owning GPU index */
    int present;
    unsigned int gi, ci;
    unsigned long long mem;
    char uuid[96];
    char name[96];
} fake_mig;

typedef struct {
    int active;
    int type;
    nvmlPciInfo_t remote;
} fake_link;

typedef struct {
    int is_mig; /* 0: every handle starts with this flag */
    int index;
    int declared;
    char name[96], uuid[96], bus[32];
    unsigned long long mem, used, reserved;
    unsigned long long churn, churned;
    int procrace, races_left;
    int has_numa, numa;
    nvmlPciInfo_t pci;
    int has_cpus;
    unsigned long cpuset[64];
    int cc_major, cc_minor;
    int has_mig, mig;
    unsigned int migslots;
    fake_mig migs[MAX_MIG];
    int nlinks;
    fake_link links[MAX_LINKS];
    int has_fabric;
    unsigned char fabric_uuid[16];
    unsigned int fabric_clique, fabric_state, fabric_health;
    int fabric_status;
    int nfails;
    char fail_fn[MAX_FAILS][64];
    int fail_code[MAX_FAILS];
} fake_gpu;

static fake_gpu gpus[MAX_GPUS];
static int gpu_count;
static int init_code, count_error, shutdown_code, initialized;
static long long init_delay_us;
EXPORT int fake_nvml_init_count;
EXPORT int fake_nvml_shutdown_count;
static int fabric_version = 3;
static long long count_override = -1;
static char driver[128];
static int topo[MAX_GPUS][MAX_GPUS], p2p[MAX_GPUS][MAX_GPUS];
static fake_proc procs[MAX_PROCS];
static int proc_count;

static char *rest(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        s[--n] = '\0';
    return s;
}

static int set_bits(const char *list, unsigned long *set, unsigned size)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    memset(set, 0, size * sizeof *set);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int lo, hi;
        if (sscanf(tok, "%d-%d", &lo, &hi) != 2)
            hi = lo = atoi(tok);
        for (int c = lo; c <= hi; c++)
            if ((unsigned)c / 64 < size)
                set[c / 64] |= 1UL << (c % 64);
    }
    return OK;
}

static void fill_pci(nvmlPciInfo_t *pci, const char *bus)
{
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", bus);
    /* the legacy field holds the short form, as the real library does */
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", strlen(bus) > 4 ? bus + 4 : bus);
    sscanf(bus, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
}

static void parse_gpu(int i, char *key, char *value)
{
    fake_gpu *g = &gpus[i];
    g->declared = 1;
    if (i + 1 > gpu_count)
        gpu_count = i + 1;
    if (!strcmp(key, "name"))
        snprintf(g->name, sizeof g->name, "%s", value);
    else if (!strcmp(key, "uuid"))
        snprintf(g->uuid, sizeof g->uuid, "%s", value);
    else if (!strcmp(key, "bus")) {
        snprintf(g->bus, sizeof g->bus, "%s", value);
        fill_pci(&g->pci, g->bus);
    }
    else if (!strcmp(key, "mem"))
        g->mem = strtoull(value, NULL, 10);
    else if (!strcmp(key, "used"))
        sscanf(value, "%llu %llu", &g->used, &g->reserved);
    else if (!strcmp(key, "proc") && proc_count < MAX_PROCS) {
        fake_proc *p = &procs[proc_count];
        char used[32];
        p->gpu = i, p->slot = -1;
        if (sscanf(value, "%u %31s %d", &p->pid, used, &p->slot) >= 2) {
            p->used = strcmp(used, "na") ? strtoull(used, NULL, 10) : NOT_AVAILABLE;
            proc_count++;
        }
    } else if (!strcmp(key, "churn"))
        g->churn = strtoull(value, NULL, 10);
    else if (!strcmp(key, "procrace"))
        g->procrace = atoi(value);
    else if (!strcmp(key, "numa"))
        g->has_numa = 1, g->numa = atoi(value);
    else if (!strcmp(key, "cpus"))
        g->has_cpus = 1, set_bits(value, g->cpuset, 64);
    else if (!strcmp(key, "cc"))
        sscanf(value, "%d %d", &g->cc_major, &g->cc_minor);
    else if (!strcmp(key, "mig"))
        g->has_mig = 1, g->mig = atoi(value);
    else if (!strcmp(key, "migslots"))
        g->migslots = (unsigned)strtoul(value, NULL, 10);
    else if (!strcmp(key, "migdev")) {
        unsigned slot, gi, ci;
        unsigned long long mem;
        int used = 0;
        char uuid[96];
        if (sscanf(value, "%u %u %u %llu %95s %n", &slot, &gi, &ci, &mem, uuid, &used) >= 5 &&
            slot < MAX_MIG) {
            fake_mig *m = &g->migs[slot];
            m->is_mig = 1, m->gpu = i, m->present = 1, m->gi = gi, m->ci = ci, m->mem = mem;
            snprintf(m->uuid, sizeof m->uuid, "%s", uuid);
            snprintf(m->name, sizeof m->name, "%s", rest(value + used));
        }
    } else if (!strcmp(key, "links"))
        g->nlinks = atoi(value);
    else if (!strcmp(key, "nvlink")) {
        int link, active, type;
        char remote[32];
        if (sscanf(value, "%d %d %d %31s", &link, &active, &type, remote) == 4 && link >= 0 &&
            link < MAX_LINKS) {
            g->links[link].active = active;
            g->links[link].type = type;
            fill_pci(&g->links[link].remote, remote);
        }
    } else if (!strcmp(key, "fabric")) {
        char hex[33];
        if (sscanf(value, "%32s %u %u %d %u", hex, &g->fabric_clique, &g->fabric_state,
                   &g->fabric_status, &g->fabric_health) == 5 && strlen(hex) == 32) {
            g->has_fabric = 1;
            for (int k = 0; k < 16; k++) {
                unsigned int byte = 0;
                sscanf(hex + 2 * k, "%2x", &byte);
                g->fabric_uuid[k] = (unsigned char)byte;
            }
        }
    } else if (!strcmp(key, "fail") && g->nfails < MAX_FAILS) {
        if (sscanf(value, "%63s %d", g->fail_fn[g->nfails], &g->fail_code[g->nfails]) == 2)
            g->nfails++;
    }
}

/* Re-read the topology only when the file changed: a real nvmlInit does not pay for
 * parsing a text file, and the benchmark should time the callers, not this fake. */
static char last_path[1024];
static struct stat last_stat;
static int last_missing; /* last_path could not be read */

static int unchanged(const char *path, struct stat *now)
{
    if (!path)
        return 0;
    if (stat(path, now) != 0)
        return last_missing && !strcmp(path, last_path);
    return !last_missing && !strcmp(path, last_path) && now->st_ino == last_stat.st_ino &&
           now->st_size == last_stat.st_size && now->st_mtim.tv_sec == last_stat.st_mtim.tv_sec &&
           now->st_mtim.tv_nsec == last_stat.st_mtim.tv_nsec;
}

static void remember(const char *path)
{
    snprintf(last_path, sizeof last_path, "%s", path ? path : "");
    last_missing = path != NULL && stat(path, &last_stat) != 0;
}

static void load(void)
{
    const char *path = getenv("FAKE_NVML_TOPOLOGY");
    struct stat now;
    if (unchanged(path, &now))
        return;
    remember(path);
    memset(gpus, 0, sizeof gpus);
    gpu_count = 0, proc_count = 0, init_code = 0, fabric_version = 3, count_error = 0;
    shutdown_code = 0, count_override = -1, init_delay_us = 0;
    snprintf(driver, sizeof driver, "0.0");
    for (int i = 0; i < MAX_GPUS; i++) {
        gpus[i].index = i;
        for (int j = 0; j < MAX_GPUS; j++)
            topo[i][j] = 50, p2p[i][j] = 5;
    }
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *s = rest(line), word[128], key[32];
        int i, j, v, used = 0;
        unsigned long long n;
        if (!*s || *s == '#')
            continue;
        if (sscanf(s, "gpu %d %31s %n", &i, key, &used) == 2 && i >= 0 && i < MAX_GPUS)
            parse_gpu(i, key, rest(s + used));
        else if (sscanf(s, "topo %d %d %d", &i, &j, &v) == 3 && i < MAX_GPUS && j < MAX_GPUS)
            topo[i][j] = topo[j][i] = v;
        else if (sscanf(s, "p2p %d %d %d", &i, &j, &v) == 3 && i < MAX_GPUS && j < MAX_GPUS)
            p2p[i][j] = p2p[j][i] = v;
        else if (sscanf(s, "init_delay_us %llu", &n) == 1)
            init_delay_us = (long long)n;
        else if (sscanf(s, "init %d", &v) == 1)
            init_code = v;
        else if (sscanf(s, "count_error %d", &v) == 1)
            count_error = v;
        else if (sscanf(s, "count %llu", &n) == 1)
            count_override = (long long)(n & 0xffffffffULL);
        else if (sscanf(s, "fabric_version %d", &v) == 1)
            fabric_version = v;
        else if (sscanf(s, "shutdown %d", &v) == 1)
            shutdown_code = v;
        else if (sscanf(s, "driver %127s", word) == 1)
            snprintf(driver, sizeof driver, "%s", word);
    }
    fclose(f);
}

static int failure(const fake_gpu *g, const char *fn)
{
    for (int k = 0; k < g->nfails; k++)
        if (!strcmp(g->fail_fn[k], fn))
            return g->fail_code[k];
    return 0;
}

/* Resolve a handle to its GPU (for MIG handles: the owning GPU) and apply injected failures. */
#define GPU_OF(handle) \
    (((fake_mig *)(handle))->is_mig ? &gpus[((fake_mig *)(handle))->gpu] : (fake_gpu *)(handle))
#define ENTER(handle, fn)                                  \
    if (!initialized)                                      \
        return E_UNINIT;                                   \
    if ((handle) == NULL)                                  \
        return E_INVALID;                                  \
    {                                                      \
        int rc_ = failure(GPU_OF(handle), fn);             \
        if (rc_)                                           \
            return rc_;                                    \
    }

static nvmlReturn_t copy_cpus(const fake_gpu *g, unsigned long *set, unsigned size)
{
    if (!g->has_cpus)
        return E_NOT_SUPPORTED;
    memset(set, 0, size * sizeof *set);
    memcpy(set, g->cpuset, (size < 64 ? size : 64) * sizeof *set);
    return OK;
}

static void churn(fake_gpu *g)
{
    int restart = g->used + g->reserved + g->churn > g->mem;
    for (int k = 0; k < proc_count; k++) {
        fake_proc *p = &procs[k];
        if (p->gpu == g->index && p->slot < 0 && p->used != NOT_AVAILABLE)
            p->used = restart ? p->used - g->churned : p->used + g->churn;
    }
    g->used = restart ? g->used - g->churned : g->used + g->churn;
    g->churned = restart ? 0 : g->churned + g->churn;
}

/* Spend init_delay_us of the calling thread's CPU time, as a real driver's init does in
 * its ioctls (CPU time, not the wall clock: a loaded machine must not shorten it). */
static void init_cost(void)
{
    struct timespec start, now;
    if (init_delay_us <= 0)
        return;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    while ((now.tv_sec - start.tv_sec) * 1000000LL + (now.tv_nsec - start.tv_nsec) / 1000 <
           init_delay_us);
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    fake_nvml_init_count++;
    load();
    init_cost();
    if (init_code)
        return init_code;
    initialized++;
    return OK;
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return nvmlInit_v2();
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    fake_nvml_shutdown_count++;
    if (!initialized)
        return E_UNINIT;
    initialized--;
    return shutdown_code;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t rc)
{
    static char text[32];
    snprintf(text, sizeof text, "fake NVML error %d", rc);
    return text;
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *out, unsigned int len)
{
    if (!initialized)
        return E_UNINIT;
    if (strlen(driver) + 1 > len)
        return E_INSUFFICIENT;
    snprintf(out, len, "%s", driver);
    return OK;
}

/* Another topology than the one read: the "driver" was reloaded under its callers. */
static int topology_replaced(void)
{
    const char *path = getenv("FAKE_NVML_TOPOLOGY");
    struct stat now;
    if (path == NULL ? last_path[0] == '\0' : unchanged(path, &now))
        return 0;
    initialized = 0;
    return 1;
}

/* One snapshot begins (each reader asks the count once per read). */
static void next_read(void)
{
    for (int i = 0; i < gpu_count; i++) {
        gpus[i].races_left = gpus[i].procrace;
        if (gpus[i].churn)
            churn(&gpus[i]);
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!initialized || topology_replaced())
        return E_UNINIT;
    next_read();
    if (count_error)
        return count_error;
    *count = count_override >= 0 ? (unsigned)count_override : (unsigned)gpu_count;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **handle)
{
    if (!initialized)
        return E_UNINIT;
    if (index >= (unsigned)gpu_count)
        return E_INVALID;
    int rc = failure(&gpus[index], "nvmlDeviceGetHandleByIndex_v2");
    if (rc)
        return rc;
    *handle = &gpus[index];
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(void *h, char *out, unsigned int len)
{
    ENTER(h, "nvmlDeviceGetName");
    snprintf(out, len, "%s", ((fake_mig *)h)->is_mig ? ((fake_mig *)h)->name : GPU_OF(h)->name);
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(void *h, char *out, unsigned int len)
{
    ENTER(h, "nvmlDeviceGetUUID");
    snprintf(out, len, "%s", ((fake_mig *)h)->is_mig ? ((fake_mig *)h)->uuid : GPU_OF(h)->uuid);
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(void *h, nvmlPciInfo_t *pci)
{
    ENTER(h, "nvmlDeviceGetPciInfo_v3");
    *pci = GPU_OF(h)->pci;
    return OK;
}

/* Memory in use on a MIG device: what its processes use. */
static unsigned long long mig_used(void *h)
{
    const fake_mig *m = (const fake_mig *)h;
    unsigned long long used = 0;
    for (int k = 0; k < proc_count; k++)
        if (procs[k].gpu == m->gpu && procs[k].slot == (int)(m - gpus[m->gpu].migs) &&
            procs[k].used != NOT_AVAILABLE)
            used += procs[k].used;
    return used;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(void *h, nvmlMemory_t *mem)
{
    ENTER(h, "nvmlDeviceGetMemoryInfo");
    const fake_gpu *g = GPU_OF(h);
    mem->total = ((fake_mig *)h)->is_mig ? ((fake_mig *)h)->mem : g->mem;
    mem->used = ((fake_mig *)h)->is_mig ? mig_used(h) : g->used + g->reserved;
    mem->free = mem->total - mem->used;
    return OK;
}

/* The processes of a GPU (slot -1) or of its MIG device, as NVML lists them. */
static nvmlReturn_t list_processes(void *h, unsigned int *count, void *infos, int v2)
{
    fake_gpu *g = GPU_OF(h);
    int slot = ((fake_mig *)h)->is_mig ? (int)((fake_mig *)h - g->migs) : -1;
    unsigned int n = 0;
    if (count == NULL)
        return E_INVALID;
    for (int k = 0; k < proc_count; k++)
        n += procs[k].gpu == g->index && procs[k].slot == slot;
    if (g->races_left > 0) {
        g->races_left--;
        *count += 1;
        return E_INSUFFICIENT;
    }
    if (*count < n || (infos == NULL && n > 0)) {
        *count = n;
        return E_INSUFFICIENT;
    }
    unsigned int filled = 0;
    for (int k = 0; k < proc_count && filled < n; k++) {
        const fake_proc *p = &procs[k];
        if (p->gpu != g->index || p->slot != slot)
            continue;
        if (v2) {
            nvmlProcessInfo_v2_t *info = (nvmlProcessInfo_v2_t *)infos + filled;
            info->pid = p->pid, info->usedGpuMemory = p->used;
            info->gpuInstanceId = slot < 0 ? 0xFFFFFFFFu : g->migs[slot].gi;
            info->computeInstanceId = slot < 0 ? 0xFFFFFFFFu : g->migs[slot].ci;
        } else {
            nvmlProcessInfo_v1_t *info = (nvmlProcessInfo_v1_t *)infos + filled;
            info->pid = p->pid, info->usedGpuMemory = p->used;
        }
        filled++;
    }
    *count = n;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(void *h, unsigned int *count,
                                                         void *infos)
{
    ENTER(h, "nvmlDeviceGetComputeRunningProcesses");
    return list_processes(h, count, infos, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(void *h, unsigned int size, unsigned long *set)
{
    ENTER(h, "nvmlDeviceGetCpuAffinity");
    return copy_cpus(GPU_OF(h), set, size);
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor)
{
    ENTER(h, "nvmlDeviceGetCudaComputeCapability");
    *major = GPU_OF(h)->cc_major;
    *minor = GPU_OF(h)->cc_minor;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(void *a, void *b, int *level)
{
    ENTER(a, "nvmlDeviceGetTopologyCommonAncestor");
    *level = topo[GPU_OF(a)->index][GPU_OF(b)->index];
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(void *a, void *b, int caps, int *status)
{
    ENTER(a, "nvmlDeviceGetP2PStatus");
    (void)caps;
    *status = p2p[GPU_OF(a)->index][GPU_OF(b)->index];
    return OK;
}

static nvmlReturn_t link_of(void *h, unsigned int link, fake_link **out)
{
    fake_gpu *g = GPU_OF(h);
    if (g->nlinks == 0)
        return E_NOT_SUPPORTED;
    if (link >= (unsigned)g->nlinks)
        return E_INVALID;
    *out = &g->links[link];
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(void *h, unsigned int link, int *active)
{
    fake_link *l;
    ENTER(h, "nvmlDeviceGetNvLinkState");
    nvmlReturn_t rc = link_of(h, link, &l);
    if (rc == OK)
        *active = l->active;
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(void *h, unsigned int link,
                                                         nvmlPciInfo_t *pci)
{
    fake_link *l;
    ENTER(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    nvmlReturn_t rc = link_of(h, link, &l);
    if (rc == OK)
        *pci = l->remote;
    return rc;
}

#ifndef FAKE_OLD_DRIVER
typedef struct {
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
} nvmlGpuFabricInfo_t;

typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;

typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
    unsigned char healthSummary;
} nvmlGpuFabricInfo_v3_t;

EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(void *h, nvmlGpuFabricInfo_t *info)
{
    ENTER(h, "nvmlDeviceGetGpuFabricInfo");
    const fake_gpu *g = GPU_OF(h);
    if (!g->has_fabric)
        return E_NOT_SUPPORTED;
    memcpy(info->clusterUuid, g->fabric_uuid, 16);
    info->status = g->fabric_status;
    info->cliqueId = g->fabric_clique;
    info->state = (unsigned char)g->fabric_state;
    return OK;
}

/* The version tag is checked as NVML checks it: size and version both, and only versions
 * up to fabric_version are known. */
EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(void *h, nvmlGpuFabricInfo_v3_t *info)
{
    ENTER(h, "nvmlDeviceGetGpuFabricInfoV");
    const fake_gpu *g = GPU_OF(h);
    const unsigned int v2 = (unsigned int)(sizeof(nvmlGpuFabricInfo_v2_t) | 2u << 24);
    const unsigned int v3 = (unsigned int)(sizeof(nvmlGpuFabricInfo_v3_t) | 3u << 24);
    if (!((info->version == v3 && fabric_version >= 3) ||
          (info->version == v2 && fabric_version >= 2)))
        return E_VERSION_MISMATCH;
    if (!g->has_fabric)
        return E_NOT_SUPPORTED;
    memcpy(info->clusterUuid, g->fabric_uuid, 16);
    info->status = g->fabric_status;
    info->cliqueId = g->fabric_clique;
    info->state = (unsigned char)g->fabric_state;
    info->healthMask = g->fabric_health;
    if (info->version == v3)
        info->healthSummary = 0;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(void *h, nvmlMemory_v2_t *mem)
{
    ENTER(h, "nvmlDeviceGetMemoryInfo");
    ENTER(h, "nvmlDeviceGetMemoryInfo_v2");
    if (mem->version != (sizeof *mem | 2u << 24))
        return E_VERSION_MISMATCH;
    const fake_gpu *g = GPU_OF(h);
    mem->total = ((fake_mig *)h)->is_mig ? ((fake_mig *)h)->mem : g->mem;
    mem->reserved = ((fake_mig *)h)->is_mig ? 0 : g->reserved;
    mem->used = ((fake_mig *)h)->is_mig ? mig_used(h) : g->used;
    mem->free = mem->total - mem->used - mem->reserved;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(void *h, unsigned int *count,
                                                            void *infos)
{
    ENTER(h, "nvmlDeviceGetComputeRunningProcesses_v2");
    return list_processes(h, count, infos, 1);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned int *count,
                                                            void *infos)
{
    ENTER(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    return list_processes(h, count, infos, 1);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(void *h, unsigned int link, int *type)
{
    fake_link *l;
    ENTER(h, "nvmlDeviceGetNvLinkRemoteDeviceType");
    nvmlReturn_t rc = link_of(h, link, &l);
    if (rc == OK)
        *type = l->type;
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(void *h, unsigned int *node)
{
    ENTER(h, "nvmlDeviceGetNumaNodeId");
    if (!GPU_OF(h)->has_numa)
        return E_NOT_SUPPORTED;
    *node = (unsigned)GPU_OF(h)->numa;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(void *h, unsigned int size, unsigned long *set,
                                                int scope)
{
    ENTER(h, "nvmlDeviceGetMemoryAffinity");
    (void)scope;
    if (!GPU_OF(h)->has_numa)
        return E_NOT_SUPPORTED;
    char node[16];
    snprintf(node, sizeof node, "%d", GPU_OF(h)->numa);
    return set_bits(node, set, size);
}

EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(void *h, unsigned int size,
                                                        unsigned long *set, int scope)
{
    ENTER(h, "nvmlDeviceGetCpuAffinityWithinScope");
    (void)scope;
    return copy_cpus(GPU_OF(h), set, size);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(void *h, unsigned int *current, unsigned int *pending)
{
    ENTER(h, "nvmlDeviceGetMigMode");
    if (!GPU_OF(h)->has_mig)
        return E_NOT_SUPPORTED;
    *current = *pending = (unsigned)GPU_OF(h)->mig;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(void *h, unsigned int *count)
{
    ENTER(h, "nvmlDeviceGetMaxMigDeviceCount");
    if (!GPU_OF(h)->has_mig)
        return E_NOT_SUPPORTED;
    *count = GPU_OF(h)->migslots;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(void *h, unsigned int slot, void **mig)
{
    ENTER(h, "nvmlDeviceGetMigDeviceHandleByIndex");
    fake_gpu *g = GPU_OF(h);
    if (slot >= g->migslots)
        return E_INVALID;
    if (slot >= MAX_MIG || !g->migs[slot].present)
        return E_NOT_FOUND;
    *mig = &g->migs[slot];
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(void *h, unsigned int *id)
{
    ENTER(h, "nvmlDeviceGetGpuInstanceId");
    if (!((fake_mig *)h)->is_mig)
        return E_INVALID;
    *id = ((fake_mig *)h)->gi;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(void *h, unsigned int *id)
{
    ENTER(h, "nvmlDeviceGetComputeInstanceId");
    if (!((fake_mig *)h)->is_mig)
        return E_INVALID;
    *id = ((fake_mig *)h)->ci;
    return OK;
}
#endif
