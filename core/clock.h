/* clock.h — the one clock: monotonic time for durations, rates and deadlines (ms as double for
 * timings, integer ms / ns for poll timeouts and spin budgets, seconds for rates), and the
 * CLOCK_REALTIME deadline that pthread_cond_timedwait wants (its default clock). Header-only
 * (static inline), so every layer may use it without a link dependency. */
#ifndef MT_CLOCK_H
#define MT_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic milliseconds (arbitrary origin, never jumps). */
static inline double mt_clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Monotonic seconds. */
static inline double mt_clock_s(void) { return mt_clock_ms() * 1e-3; }

/* Monotonic whole milliseconds, for integer deadlines and poll() timeouts. */
static inline int64_t mt_clock_ms_i64(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Monotonic nanoseconds, for spin budgets. */
static inline uint64_t mt_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The wall-clock (CLOCK_REALTIME) time `seconds` from now, as pthread_cond_timedwait and
 * sem_timedwait take their absolute deadline; seconds = 0 is the current wall-clock time. */
static inline struct timespec mt_clock_realtime_after(double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const int64_t whole = (int64_t)seconds;
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((seconds - (double)whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec += 1;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

#endif
