/* backend_cuda_module.c — finds and opens the CUDA module (see backend_cuda_module.h) and gives
 * core/ the CUDA backend's three entry points of backend.h through it: mt_backend_cuda_create,
 * mt_cuda_device_count, mt_cuda_available. Order of checks, cheapest first, each with its own
 * message: this build has CUDA (MT_HAVE_CUDA) -> a CUDA driver is installed (libcuda.so.1
 * opens) -> the module file is found and loads -> the runtime counts GPUs. Rule kept: a missing
 * backend is an error message, never a link error or a crash; a binary built with CUDA runs on a
 * machine without a driver and says why it uses the CPU. Nothing here runs for the CPU backend.
 * Where the module is looked for, first hit wins: $MT_CUDA_MODULE (a path), then the folder of
 * the executable (/proc/self/exe), its build/ subfolder (./mtrain in a source tree), and its two
 * parents (test binaries in build/test/unit). */
#include "core/backend_cuda_module.h"

#include "core/device_peak.h"
#include "core/op_check.h"
#include "core/status.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MT_NO_CUDA_BUILD_MSG                                                                 \
    "this mtrain was built without the CUDA backend (nvcc not found or CUDA=0); rebuild "   \
    "with make CUDA=1 on a machine with the CUDA toolkit, or use --backend cpu"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const mt_cuda_module *g_module;
static int g_module_tried;
static char g_module_why[1024];
static void *g_driver;
static int g_driver_tried;
static char g_driver_why[512];

int mt_cuda_driver_present(char *why, size_t why_bytes) {
    pthread_mutex_lock(&g_lock);
    if (!g_driver_tried) {
        g_driver_tried = 1;
        g_driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (!g_driver) {
            const char *e = dlerror();
            if (!e || strstr(e, "No such file"))
                snprintf(g_driver_why, sizeof g_driver_why, "no CUDA driver (libcuda.so.1 not found)");
            else
                snprintf(g_driver_why, sizeof g_driver_why, "no usable CUDA driver (libcuda.so.1: %.400s)", e);
        }
    }
    const int ok = g_driver != NULL;
    if (!ok && why && why_bytes) snprintf(why, why_bytes, "%s", g_driver_why);
    pthread_mutex_unlock(&g_lock);
    return ok;
}

int mt_cuda_module_loaded(void) {
    pthread_mutex_lock(&g_lock);
    const int loaded = g_module != NULL;
    pthread_mutex_unlock(&g_lock);
    return loaded;
}

#ifdef MT_HAVE_CUDA
/* What the module takes from the executable that opens it (its undefined mt_* symbols; test/e2e/
 * cuda_module.sh checks this list against the module): naming them here makes every binary that
 * links this file (mtrain and the test programs that create the CUDA backend) pull their objects
 * out of libmtrain.a and export them (--export-dynamic-symbol=mt_*). Without it a test program
 * that never calls, say, mt_device_peak_bf16_tflops itself could not load the module: dlopen fails
 * with "undefined symbol", as the first run of the GPU check found. */
void *const mt_cuda_module_host_imports[] = {
    (void *)mt_errorf,          (void *)mt_error_context,       (void *)mt_device_peak_bf16_tflops,
    (void *)mt_op_check_adamw,  (void *)mt_op_check_attention,  (void *)mt_op_check_embedding,
    (void *)mt_op_check_rope,   (void *)mt_op_check_swiglu,     (void *)mt_op_check_xent_vp,
    (void *)mt_xent_vp_valid_cols,
};

/* Tries one file; returns the table or NULL, appending what went wrong to g_module_why. */
static const mt_cuda_module *open_module(const char *path) {
    size_t used = strlen(g_module_why);
    if (access(path, F_OK) != 0) {
        snprintf(g_module_why + used, sizeof g_module_why - used, "%s%s (absent)", used ? ", " : "", path);
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(g_module_why + used, sizeof g_module_why - used, "%s%s: %s", used ? ", " : "", path,
                 e ? e : "dlopen failed");
        return NULL;
    }
    mt_cuda_module_entry_fn entry = NULL;
    *(void **)&entry = dlsym(h, MT_CUDA_MODULE_ENTRY); /* POSIX's way to turn void* into a function */
    const mt_cuda_module *m = entry ? entry(MT_CUDA_MODULE_ABI) : NULL;
    if (!m || m->abi != MT_CUDA_MODULE_ABI) {
        snprintf(g_module_why + used, sizeof g_module_why - used,
                 "%s%s: %s (rebuild: make)", used ? ", " : "", path,
                 entry ? "built for another version of mtrain" : "has no " MT_CUDA_MODULE_ENTRY);
        dlclose(h);
        return NULL;
    }
    return m; /* never closed: the backend's code lives in it until the process ends */
}

static void find_module(void) {
    const char *env = getenv("MT_CUDA_MODULE");
    if (env && *env) {
        g_module = open_module(env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(g_module_why, sizeof g_module_why, "cannot read /proc/self/exe to find " MT_CUDA_MODULE_FILE
                 "; set MT_CUDA_MODULE=/path/to/" MT_CUDA_MODULE_FILE);
        return;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    static const char *const rel[] = {"", "/build", "/..", "/../.."};
    for (size_t k = 0; k < sizeof rel / sizeof rel[0] && !g_module; k++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s%s/" MT_CUDA_MODULE_FILE, exe, rel[k]);
        g_module = open_module(path);
    }
}
#endif

const mt_cuda_module *mt_cuda_module_get(char *why, size_t why_bytes) {
    pthread_mutex_lock(&g_lock);
    if (!g_module_tried) {
        g_module_tried = 1;
#ifdef MT_HAVE_CUDA
        find_module();
        if (!g_module) {
            char tried[sizeof g_module_why];
            snprintf(tried, sizeof tried, "%s", g_module_why);
            snprintf(g_module_why, sizeof g_module_why,
                     "the CUDA module " MT_CUDA_MODULE_FILE " did not load (tried %.880s); run make, or set "
                     "MT_CUDA_MODULE to its path",
                     tried);
        }
#else
        snprintf(g_module_why, sizeof g_module_why, "%s", MT_NO_CUDA_BUILD_MSG);
#endif
    }
    const mt_cuda_module *m = g_module;
    if (!m && why && why_bytes) snprintf(why, why_bytes, "%s", g_module_why);
    pthread_mutex_unlock(&g_lock);
    return m;
}

/* The module, after the build and driver checks; NULL with `why` otherwise. */
static const mt_cuda_module *usable_module(char *why, size_t why_bytes) {
#ifndef MT_HAVE_CUDA
    if (why && why_bytes) snprintf(why, why_bytes, "%s", MT_NO_CUDA_BUILD_MSG);
    return NULL;
#else
    if (!mt_cuda_driver_present(why, why_bytes)) return NULL;
    return mt_cuda_module_get(why, why_bytes);
#endif
}

mt_status mt_backend_cuda_create(mt_backend *be, int device) {
    char why[1024];
    if (be) memset(be, 0, sizeof *be);
    const mt_cuda_module *m = usable_module(why, sizeof why);
    if (!m) {
#ifdef MT_HAVE_CUDA
        return mt_errorf(MT_ERR_CUDA, "%s; run with --backend cpu (or training.backend: cpu)", why);
#else
        return mt_errorf(MT_ERR_UNSUPPORTED, "%s", why);
#endif
    }
    return m->backend_create(be, device);
}

int mt_cuda_device_count(void) {
    const mt_cuda_module *m = usable_module(NULL, 0);
    return m ? m->device_count(NULL, 0) : 0;
}

int mt_cuda_available(char *why, size_t why_bytes) {
    const mt_cuda_module *m = usable_module(why, why_bytes);
    return m ? m->device_count(why, why_bytes) > 0 : 0;
}
