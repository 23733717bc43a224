/* test.h — the tiny assertion kit every C test uses. A test binary exits 0 when all its
 * checks hold, 1 otherwise, and prints one line per failed check with file:line. */
#ifndef MT_TEST_H
#define MT_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mt_test_failures = 0;
static int mt_test_checks = 0;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        mt_test_checks++;                                                             \
        if (!(cond)) {                                                                \
            mt_test_failures++;                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
        }                                                                             \
    } while (0)

#define CHECKF(cond, ...)                                                             \
    do {                                                                              \
        mt_test_checks++;                                                             \
        if (!(cond)) {                                                                \
            mt_test_failures++;                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, "\n");                                                    \
        }                                                                             \
    } while (0)

/* |a - b| <= atol + rtol * |b| */
#define CHECK_NEAR(a, b, atol, rtol)                                                  \
    do {                                                                              \
        double a_ = (double)(a), b_ = (double)(b);                                    \
        CHECKF(fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_), "%s = %.9g, %s = %.9g",   \
               #a, a_, #b, b_);                                                       \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                               \
    CHECKF(strstr((hay), (needle)) != NULL, "\"%s\" does not contain \"%s\"", (hay),  \
           (needle))

#define TEST_MAIN_END()                                                               \
    do {                                                                              \
        printf("%s: %d checks, %d failed\n", __FILE__, mt_test_checks,                \
               mt_test_failures);                                                     \
        return mt_test_failures ? 1 : 0;                                              \
    } while (0)

#endif
