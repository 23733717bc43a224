/* test/cuda_emu/inc/cub/device/device_radix_sort.cuh — stands in for cub's device radix sort in
 * test/cuda_emu/run.sh's host builds: SortKeys with cub's two-call protocol (a NULL temporary
 * storage asks for its size) and its bit range [begin_bit, end_bit) as the sort key, done by a
 * stable std::sort on the host. The emulated kernels' own code is what the emulation checks;
 * cub is NVIDIA's. Test harness only. */
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
namespace cub {
struct DeviceRadixSort {
    template <class K>
    static cudaError_t SortKeys(void *temp, size_t &temp_bytes, const K *in, K *out, int n, int begin_bit = 0,
                                int end_bit = (int)sizeof(K) * 8, cudaStream_t = 0) {
        if (!temp) { temp_bytes = 16; return cudaSuccess; }
        const K mask = end_bit - begin_bit >= (int)sizeof(K) * 8 ? ~(K)0 : (((K)1 << (end_bit - begin_bit)) - 1);
        memcpy(out, in, (size_t)n * sizeof(K));
        std::stable_sort(out, out + n, [&](K a, K b) { return ((a >> begin_bit) & mask) < ((b >> begin_bit) & mask); });
        return cudaSuccess;
    }
};
} // namespace cub
