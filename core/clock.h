/* clock.h — the one monotonic clock (milliseconds, double) for timings and deadlines. */
#ifndef MT_CLOCK_H
#define MT_CLOCK_H

#include <time.h>

static inline double mt_clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

#endif
