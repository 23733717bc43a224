/* test_metrics.c — the JSON-lines metrics sink: a normal file round-trips the iteration and
 * validation lines (iteration, loss, no bubble keys without pp); a file whose writes fail
 * (/dev/full: ENOSPC on every write, Linux) makes mt_metrics_log_iter / _log_eval /
 * _close return MT_ERR_IO naming the path and the fix, never a silent loss; no file = MT_OK. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/test.h"
#include "train/metrics.h"

static mt_iter_metrics sample(int64_t it, double loss) {
    mt_iter_metrics m;
    memset(&m, 0, sizeof m);
    m.iteration = it;
    m.train_iters = 10;
    m.consumed_samples = 8 * it;
    m.global_batch = 8;
    m.ms_per_iter = 12.5;
    m.tokens_per_s = 1000.0;
    m.tflops = 0.5;
    m.mfu = -1;
    m.lr = 3e-4;
    m.lm_loss = loss;
    m.grad_norm = 1.25;
    m.bubble = -1;
    m.bubble_formula = -1;
    return m;
}

static void test_round_trip(void) {
    char dir[] = "/tmp/mt_test_metrics_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    mt_metrics_sink s;
    mt_status st = mt_metrics_open(&s, path);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    mt_iter_metrics m1 = sample(1, 10.75), m2 = sample(2, 9.5);
    CHECKF(mt_metrics_log_iter(NULL, &s, &m1) == MT_OK, "%s", mt_last_error());
    CHECKF(mt_metrics_log_iter(NULL, &s, &m2) == MT_OK, "%s", mt_last_error());
    CHECKF(mt_metrics_log_eval(NULL, &s, 2, 9.25) == MT_OK, "%s", mt_last_error());
    CHECKF(mt_metrics_close(&s) == MT_OK, "%s", mt_last_error());
    CHECK(s.file == NULL);
    CHECK(mt_metrics_close(&s) == MT_OK); /* closing twice is harmless */

    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char lines[4][1024] = {{0}};
    int n = 0;
    while (f && n < 4 && fgets(lines[n], sizeof lines[n], f)) n++;
    if (f) fclose(f);
    CHECKF(n == 3, "%d lines", n);
    CHECK_STR_CONTAINS(lines[0], "{\"iteration\":1,");
    CHECK_STR_CONTAINS(lines[0], "\"lm_loss\":10.75,");
    CHECK_STR_CONTAINS(lines[0], "\"consumed_samples\":8,");
    CHECK_STR_CONTAINS(lines[0], "\"mfu\":null");
    CHECK(strstr(lines[0], "bubble") == NULL);
    CHECK_STR_CONTAINS(lines[1], "{\"iteration\":2,");
    CHECK_STR_CONTAINS(lines[1], "\"lm_loss\":9.5,");
    CHECK_STR_CONTAINS(lines[2], "{\"iteration\":2,\"val_loss\":9.25,");
    for (int i = 0; i < n; i++) CHECKF(lines[i][strlen(lines[i]) - 2] == '}', "line %d: %s", i, lines[i]);
    unlink(path);
    rmdir(dir);
}

static void test_no_file(void) {
    mt_metrics_sink s;
    CHECK(mt_metrics_open(&s, "") == MT_OK);
    CHECK(s.file == NULL);
    mt_iter_metrics m = sample(1, 5.0);
    CHECK(mt_metrics_log_iter(NULL, &s, &m) == MT_OK);
    CHECK(mt_metrics_log_iter(NULL, NULL, &m) == MT_OK);
    CHECK(mt_metrics_log_eval(NULL, &s, 1, 5.0) == MT_OK);
    CHECK(mt_metrics_close(&s) == MT_OK);
}

static void test_unwritable_dir(void) {
    mt_metrics_sink s;
    mt_status st = mt_metrics_open(&s, "/nonexistent-dir/metrics.jsonl");
    CHECK(st == MT_ERR_IO);
    if (st == MT_ERR_IO) CHECK_STR_CONTAINS(mt_last_error(), "/nonexistent-dir/metrics.jsonl");
}

/* /dev/full accepts the open; every write to it fails with ENOSPC. */
static void test_disk_full(void) {
    if (access("/dev/full", W_OK) != 0) {
        printf("no writable /dev/full (not Linux?): disk-full checks skipped\n");
        return;
    }
    mt_metrics_sink s;
    mt_status st = mt_metrics_open(&s, "/dev/full");
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return;
    mt_iter_metrics m = sample(3, 7.0);
    st = mt_metrics_log_iter(NULL, &s, &m);
    CHECKF(st == MT_ERR_IO, "log_iter on /dev/full returned %s", mt_status_name(st));
    if (st == MT_ERR_IO) {
        const char *e = mt_last_error();
        CHECK_STR_CONTAINS(e, "/dev/full");
        CHECK_STR_CONTAINS(e, strerror(ENOSPC));
        CHECK_STR_CONTAINS(e, "logging.metrics");
        CHECK_STR_CONTAINS(e, "--metrics");
    }
    st = mt_metrics_log_eval(NULL, &s, 3, 7.0);
    CHECKF(st == MT_ERR_IO, "log_eval on /dev/full returned %s", mt_status_name(st));
    if (st == MT_ERR_IO) CHECK_STR_CONTAINS(mt_last_error(), "/dev/full");
    st = mt_metrics_close(&s);
    CHECKF(st == MT_ERR_IO, "close after failed writes returned %s", mt_status_name(st));
    if (st == MT_ERR_IO) CHECK_STR_CONTAINS(mt_last_error(), "/dev/full");
    CHECK(s.file == NULL);

    /* a line that fits stdio's buffer fails at the flush; a sink whose close is the first
     * flush (nothing logged since the last one) still reports through close */
    st = mt_metrics_open(&s, "/dev/full");
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return;
    CHECK(fputs("x", s.file) >= 0);
    st = mt_metrics_close(&s);
    CHECKF(st == MT_ERR_IO, "close with unflushed data on /dev/full returned %s", mt_status_name(st));
    if (st == MT_ERR_IO) {
        CHECK_STR_CONTAINS(mt_last_error(), "/dev/full");
        CHECK_STR_CONTAINS(mt_last_error(), "closing");
    }
}

/* The stdout line goes to `log` and the status reflects only the metrics file. */
static void test_log_line(void) {
    char *buf = NULL;
    size_t n = 0;
    FILE *log = open_memstream(&buf, &n);
    CHECK(log != NULL);
    if (!log) return;
    mt_metrics_sink s;
    CHECK(mt_metrics_open(&s, NULL) == MT_OK);
    mt_iter_metrics m = sample(4, 6.5);
    CHECK(mt_metrics_log_iter(log, &s, &m) == MT_OK);
    CHECK(mt_metrics_log_eval(log, &s, 4, 6.5) == MT_OK);
    fclose(log);
    CHECK_STR_CONTAINS(buf, "iteration        4/      10");
    CHECK_STR_CONTAINS(buf, "lm loss: 6.500000E+00");
    CHECK_STR_CONTAINS(buf, "validation loss at iteration 4");
    free(buf);
}

int main(void) {
    test_round_trip();
    test_no_file();
    test_unwritable_dir();
    test_disk_full();
    test_log_line();
    TEST_MAIN_END();
}
